"""TensorFlow: eager, tf.function (graph) and tf.function(jit_compile=True) (XLA)."""

from __future__ import annotations

import collections
import functools
import itertools
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from pytest_mlbench import threads as threading_
from pytest_mlbench.errors import PolicyNotApplied, Unavailable, Unsupported
from pytest_mlbench.frameworks.base import (
    Compiled,
    SettingsWatch,
    best_gflops,
    no_donation,
    package_versions,
    reachable,
)
from pytest_mlbench.precision import Policy

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TF's start-up banner out of reports
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


SCRATCH = "MLBENCH_TF_SCRATCH"  # a worker's folder for temporary files (workers.compile_caches)
CACHE_FLAG = "--tf_xla_persistent_cache_directory"  # engine/pools.compile_caches sets it
NAME_STRIDE = 1 << 20  # uids a case may use up before the next XLA trace's start


def cache_folder(environ: Mapping[str, str] = os.environ) -> str:
    """The folder TF_XLA_FLAGS gives XLA's persistent cache ("" for none)."""
    for flag in environ.get("TF_XLA_FLAGS", "").split():
        if flag.startswith(CACHE_FLAG + "="):
            return flag.split("=", 1)[1]
    return ""


def align_names() -> None:
    """Start the next names TensorFlow gives at a multiple of NAME_STRIDE. TensorFlow names a
    traced function ``__inference_<name>_<uid>`` with one process-wide counter, which every
    call and eager step advances, and XLA's persistent cache keys on that name (both of the
    entry's fingerprints): the same step traced after a different history (a later pass ran
    fewer checks, the previous case more rounds) missed its entry and compiled again.
    Aligned as the trace starts, the trace gets the same names in every process. TensorFlow
    has no setter for the counter: it is called up to 2^20 times, in C (starmap into a deque
    that keeps nothing), 0.4-0.8 s on the 2-core host loaded (its probe's loop at 32 ms)."""
    from tensorflow.python import pywrap_tfe

    uid = pywrap_tfe.TFE_Py_UID
    collections.deque(itertools.starmap(uid, itertools.repeat((), NAME_STRIDE - 1
                                                               - uid() % NAME_STRIDE)), maxlen=0)


def import_tensorflow() -> None:
    """Import TensorFlow without JAX. TensorFlow's import tries ``from jax import jit``
    (tensorflow.lite.python.util, for converting JAX functions to TFLite), which loads JAX and
    jaxlib (about 100 MB and a second of start-up here) into a process that should hold one
    framework. JAX is hidden for that one import when it is not loaded already: TFLite's JAX
    converter is then off in this process, nothing else changes, and a later ``import jax``
    works as usual."""
    if "tensorflow" in sys.modules or "jax" in sys.modules:
        return
    sys.modules["jax"] = None  # type: ignore[assignment]  # import jax: ModuleNotFoundError
    try:
        import tensorflow  # noqa: F401
    finally:
        if "jax" in sys.modules and sys.modules["jax"] is None:
            del sys.modules["jax"]


def use_scratch() -> None:
    """In a worker, temporary files go to the session's folder, which the session removes.
    AutoGraph writes the source of every function it converts to a temporary file and deletes
    it at exit, but a worker is killed when its work is done (the interpreter's teardown of
    TensorFlow costs CPU), so its files stayed in the system's temporary folder: about a
    hundred a session. Outside a worker (no SCRATCH), nothing changes."""
    folder = os.environ.get(SCRATCH)
    if folder:
        os.makedirs(folder, exist_ok=True)
        tempfile.tempdir = folder


# variable sets whose readers to_numpy_tree keeps (a case's parameters and its optimizer's
# state, with room for a few more)
READERS = 8


class TensorflowAdapter:
    name = "tensorflow"
    modules: tuple[str, ...] = ("tensorflow",)
    extra = "tensorflow"
    variants: tuple[str, ...] = ("eager", "jit", "xla")

    def __init__(self) -> None:
        use_scratch()
        import_tensorflow()
        self._device = "/CPU:0"
        self._limit: Any = None
        self._traces = 0
        self._own_traces = 0  # the harness's own (to_numpy_tree's readers), not counted
        self._xla_traces = 0  # traces of jit_compile functions: XLA compilations to come
        self._cache = cache_folder()
        self._entries_before = self._entries()
        self._count_traces()
        self._watch = SettingsWatch()
        self._watch_setter()

    def _count_traces(self) -> None:
        """Every tf.function trace builds a FuncGraph through this one function: count its
        calls (eager Keras layers and optimizers build none)."""
        from tensorflow.python.framework import func_graph

        original = func_graph.func_graph_from_py_func

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._traces += 1
            return original(*args, **kwargs)

        func_graph.func_graph_from_py_func = counted

    def _watch_setter(self) -> None:
        """Record every call of the setter behind enable_tensor_float_32_execution."""
        from tensorflow.python.framework import config

        module = config._pywrap_tensor_float_32_execution
        original = module.enable

        def watched(enabled: bool) -> Any:
            self._watch.record(f"enable_tensor_float_32_execution({enabled!r})")
            return original(enabled)

        module.enable = watched

    def devices(self) -> dict[str, str]:
        import tensorflow as tf

        out = {"cpu": "host CPU"}
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            out["gpu"] = f"{len(gpus)} x {gpus[0].name}"
        return out

    def setup(self, device: str, policy: Policy, seed: int) -> None:
        import tensorflow as tf

        if device not in self.devices():
            raise Unavailable(f"no {device} visible to tensorflow (list_physical_devices is empty)")
        if policy.gpu_only and device != "gpu":
            raise Unsupported(f"{policy.name} applies to NVIDIA GPUs only")
        self._device = "/GPU:0" if device == "gpu" else "/CPU:0"
        self._watch.begin()
        tf.config.experimental.enable_tensor_float_32_execution(policy.allow_tf32)
        self.verify_policy(policy)
        self._watch.start()
        tf.random.set_seed(seed)

    def verify_policy(self, policy: Policy) -> None:
        import tensorflow as tf

        found = tf.config.experimental.tensor_float_32_execution_enabled()
        if found != policy.allow_tf32:
            raise PolicyNotApplied(f"tensorflow TF32 execution is {'on' if found else 'off'}, "
                                   f"the {policy.name} policy needs it "
                                   f"{'on' if policy.allow_tf32 else 'off'}")
        self._watch.check(self.name, policy)

    def set_threads(self, threads: int) -> None:
        import tensorflow as tf

        try:  # possible only before the runtime starts (the env variables set it too)
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except RuntimeError:
            pass
        self._limit = threading_.limit_blas(threads)

    def threads(self) -> dict[str, Any]:
        import tensorflow as tf

        return {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                "inter_op (1 by policy)": str(tf.config.threading
                                              .get_inter_op_parallelism_threads()),
                **threading_.blas_threads()}

    def compile_events(self) -> int:
        return self._traces - self._own_traces

    def _entries(self) -> set[str]:
        try:
            return {n for n in os.listdir(self._cache) if n.endswith(".pb")} if self._cache \
                else set()
        except FileNotFoundError:
            return set()

    def persistent_cache(self) -> tuple[int, int] | None:
        """XLA compilations its persistent cache served, and those it compiled, so far (None
        with no cache). TensorFlow counts loads only in a C++ metric Python cannot read, so:
        compiled, the entries written to the folder since this process started (XLA writes
        one for each compilation it did not load, none for a load); served, the XLA traces
        less those. Another process writing to the same folder meanwhile counts as this one's
        compilations: a load may read as compiled, never the reverse."""
        if not self._cache:
            return None
        compiled = len(self._entries() - self._entries_before)
        return max(0, self._xla_traces - compiled), compiled

    def _aligned(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` for a jit_compile tf.function with a persistent cache: its trace (the only
        time TensorFlow runs the Python function) starts at aligned names, and is counted."""
        import tensorflow as tf

        align = tf.autograph.experimental.do_not_convert(align_names)

        @functools.wraps(fn)
        def traced(*args: Any, **kwargs: Any) -> Any:
            self._xla_traces += 1
            align()
            return fn(*args, **kwargs)

        return traced

    def join_at_start(self, rank: int, world: int, dp: dict[str, Any]) -> None:
        """A parallel pool's process: the CPU split into as many logical devices as the case
        has workers, before the runtime starts (it can be set only then), for
        MirroredStrategy; GPU cases use the physical GPUs."""
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * int(dp["workers"]))

    def parallel(self, case: Any, loss: Callable[..., Any], dp: dict[str, Any]) -> Any:
        from pytest_mlbench.frameworks.distributed import TFMirrored
        from pytest_mlbench.parallel import GAPS

        if case.id.strategy != "dp":
            raise Unsupported(GAPS["tensorflow"][case.id.strategy])
        if case.id.nodes > 1:
            raise Unsupported(GAPS["tensorflow"]["nodes"])
        return TFMirrored(case, loss, dp)

    def census(self, root: Any) -> tuple[int, str] | None:
        """Trainable variables behind the trainer: Keras layers' trainable weights and any
        other trainable tf.Variable it keeps."""
        import tensorflow as tf

        try:
            import keras

            kinds: tuple[type, ...] = (tf.Variable, keras.Variable, keras.layers.Layer)
        except ImportError:
            keras, kinds = None, (tf.Variable,)
        found = reachable(root, lambda o: isinstance(o, kinds), skip=lambda o: tf.is_tensor(o))
        # a tf.distribute strategy keeps variables of its own (not parameters), reachable
        # through it and through the functions it ran: they are not counted
        strategies = reachable(root, lambda o: isinstance(o, tf.distribute.Strategy),
                               skip=lambda o: tf.is_tensor(o))
        own = {id(v) for s in strategies
               for v in reachable(s, lambda o: isinstance(o, kinds), skip=lambda o: tf.is_tensor(o))}
        found = [o for o in found if id(o) not in own]
        variables: dict[int, Any] = {}
        for obj in found:
            members = obj.trainable_weights if keras and isinstance(obj, keras.layers.Layer) \
                else [obj]
            variables.update({id(v): v for v in members if getattr(v, "trainable", False)})
        if not variables:
            return None
        total = sum(int(np.prod(v.shape)) for v in variables.values())
        return total, f"{len(variables)} trainable variable(s)"

    def asarray(self, array: np.ndarray) -> Any:
        import tensorflow as tf

        with tf.device(self._device):
            if str(array.dtype) == "bfloat16":
                return tf.cast(tf.constant(array.astype(np.float32)), tf.bfloat16)
            return tf.constant(array)

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.array(value.numpy(), copy=True)

    def to_numpy_tree(self, tree: Mapping[str, Any],
                      readers: dict[Any, Any]) -> dict[str, np.ndarray]:
        """NumPy copies of a mapping's values. A variable's own read is an op of its own,
        100-160 us of CPU a variable on a 2-core host (vit's parameters and Adam slots: tens
        of milliseconds after every timed round, which audit.assert_after_fits counts as the
        round's); the variables are read together by one function that captures them, about
        12 us a variable, traced once per set of variables and kept in ``readers`` (the
        case's runner's: never reachable from the implementation, whose census would count
        the variables it holds, and dropped with the case; READERS at most), its trace not
        counted as the implementation's compilation."""
        import tensorflow as tf

        names = [k for k, v in tree.items() if not isinstance(v, tf.Tensor)]
        if len(names) < 2:
            return {k: self.to_numpy(v) for k, v in tree.items()}
        variables = [tree[k] for k in names]
        key = tuple(id(v) for v in variables)  # the reader holds them: no id is reused
        read = readers.pop(key, None)
        traced = self._traces
        if read is None:
            read = tf.function(lambda: [tf.identity(v) for v in variables], autograph=False)
        values = read()
        self._own_traces += self._traces - traced
        readers[key] = read
        while len(readers) > READERS:
            readers.pop(next(iter(readers)))
        found = dict(zip(names, values, strict=True))
        return {k: self.to_numpy(found.get(k, v)) for k, v in tree.items()}

    def take(self, value: Any, rows: np.ndarray) -> Any:
        """The rows selected on the device, by index: only the indices cross from the host."""
        import tensorflow as tf

        with tf.device(self._device):
            return tf.gather(value, rows)

    def on_device(self, value: Any) -> bool:
        kind = self._device.split("/")[-1].split(":")[0]  # "CPU" of "/CPU:0"
        device = getattr(value, "device", None)  # a Keras variable's is its tf.Variable's
        if device is None:
            device = getattr(getattr(value, "value", None), "device", "")
        return f"{kind}:" in str(device).upper()

    def concrete_types(self) -> tuple[type, ...]:
        """A timed call's results: eager tensors and resource variables (Keras 3's variables
        on the TensorFlow backend too, when Keras is loaded)."""
        import sys

        import tensorflow as tf

        found: tuple[type, ...] = (type(tf.constant(0.0)), type(tf.Variable(0.0)))
        # keras.Variable on the TensorFlow backend is keras.src.backend.Variable, a subclass
        # of the backend's core Variable; either may be what a model or optimizer holds
        for module in ("keras.src.backend.tensorflow.core", "keras.src.backend"):
            keras = sys.modules.get(module)
            if keras is not None and isinstance(getattr(keras, "Variable", None), type):
                found += (keras.Variable,)
        return found

    def sync(self, value: Any) -> None:
        """Wait for all pending work on every device (tf.test.experimental.sync_devices);
        where that API is missing, read every result back, the older portable barrier."""
        import tensorflow as tf

        barrier = getattr(getattr(tf.test, "experimental", None), "sync_devices", None)
        if barrier is not None:
            barrier()
            return
        for leaf in tf.nest.flatten(value):
            if leaf is not None:
                leaf.numpy()

    def compile(self, fn: Callable[..., Any], variant: str,
                donate: tuple[int, ...] = ()) -> Compiled:
        no_donation(self.name, donate)
        import tensorflow as tf

        if variant == "eager":
            return Compiled(fn, variant, name=getattr(fn, "__name__", ""))
        if variant not in ("jit", "xla"):
            raise Unsupported(f"tensorflow has no {variant} variant")
        if variant == "xla" and self._cache:
            fn = self._aligned(fn)
        graph = tf.function(fn, jit_compile=variant == "xla", reduce_retracing=False)
        return Compiled(graph, variant, traces=graph.experimental_get_tracing_count,
                        name=getattr(fn, "__name__", ""))

    def device_scope(self) -> Any:
        import tensorflow as tf

        return tf.device(self._device)

    def warm_up_compiler(self, device: str = "cpu") -> None:
        """The first tf.function trace and the first XLA compilation of this process, on the
        device the cases run on."""
        import tensorflow as tf

        with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
            for xla in (False, True):
                fn: Callable[..., Any] = lambda x: tf.tanh(x) * 2 + 1  # noqa: E731
                fn = self._aligned(fn) if xla and self._cache else fn
                tf.function(fn, jit_compile=xla)(tf.ones(8)).numpy()

    def matmul_gflops(self, dtype: str, n: int, repeats: int) -> float | None:
        import tensorflow as tf

        with tf.device(self._device):
            a, b = (tf.random.normal((n, n), dtype=tf.float32) for _ in range(2))
            a, b = tf.cast(a, dtype), tf.cast(b, dtype)
            return best_gflops(lambda: tf.matmul(a, b), lambda r: r.numpy(), 2.0 * n**3,
                               repeats)

    def peak_memory(self, run: Callable[[], None]) -> tuple[int, str] | None:
        import tensorflow as tf

        device = self._device.strip("/")
        try:
            tf.config.experimental.reset_memory_stats(device)
        except ValueError:
            return None
        run()
        peak = tf.config.experimental.get_memory_info(device)["peak"]
        return (int(peak), "step") if peak else None  # 0 on CPU: not tracked

    def versions(self) -> dict[str, str]:
        return package_versions("tensorflow-cpu", "tensorflow", "keras")
