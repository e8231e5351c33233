"""JAX: eager (op-by-op dispatch) and jax.jit; explicit device placement and x64 handling."""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_mlbench import threads as threading_
from pytest_mlbench.errors import PolicyNotApplied, Unavailable, Unsupported
from pytest_mlbench.frameworks.base import (
    Compiled,
    SettingsWatch,
    TraceCounter,
    best_gflops,
    package_versions,
    reachable,
)
from pytest_mlbench.precision import Policy, numpy_dtype

PLATFORMS = {"cpu": "cpu", "gpu": "gpu", "tpu": "tpu"}
# JAX explains each cache miss of a function traced from user code on this logger, and
# announces every backend compilation (``jit(<name>)``) as this monitoring event
TRACE_LOGGER = "jax._src.interpreters.partial_eval"
CACHE_LOGGER = "jax._src.compiler"  # XLA's persistent cache: its misses and writes
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
CACHE_HIT, CACHE_MISS = "/jax/compilation_cache/cache_hits", "/jax/compilation_cache/cache_misses"
XLA_POOL = ("tf_XLAEigen",)  # the names of XLA's CPU compute threads
# libraries of the JAX stack whose own jitted helpers run as shipped inside an eager step
LIBRARIES = ("optax", "flax", "equinox", "chex")


@functools.cache
def _library_folders() -> tuple[str, ...]:
    specs = [importlib.util.find_spec(name) for name in LIBRARIES]
    return tuple(os.path.join(os.path.realpath(folder), "") for spec in specs if spec
                 for folder in spec.submodule_search_locations or ())


def library_file(path: str) -> bool:
    """Is ``path`` a file of one of LIBRARIES (not the implementation's, nor this package's)?"""
    return os.path.realpath(path).startswith(_library_folders())


class _Compiles(logging.Handler):
    """Counts XLA compilations in this process: every one (``all``) and the implementation's
    own (``count``). Eager dispatch compiles each primitive at its first use, so once a step
    has run, nothing compiles at all unless something changes from step to step (a Python
    integer used as a power compiles a new ``integer_pow`` for each value): ``all`` must not
    rise while timed.

    The implementation's own are the functions JAX explains as traced for the first time
    (its own jnp functions are left out) that are then compiled for a backend: a jit of the
    implementation's, which an eager variant may not have. A function defined in one of
    LIBRARIES is the library's way of running as shipped, not the implementation's jit (optax
    jits Adam's bias correction; torch's own TorchScript is treated alike): an eager step
    may call it, and it still counts in ``all``."""

    MISS = re.compile(r"(?:never seen function:\s+(\S+) id=\d+|\n  for (\S+))"
                      r"(?: defined at (\S+?)(?::\d+)?)?$", re.MULTILINE)

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.user: set[str] = set()
        self.count = 0
        self.all = 0
        self.loaded = self.missed = 0  # XLA's persistent cache: served, compiled for it

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "TRACING CACHE MISS" in text:
            self.user.update(m[1] or m[2] for m in self.MISS.finditer(text)
                             if not (m[3] and library_file(m[3])))

    def cached(self, event: str, **kwargs: Any) -> None:
        """XLA's persistent cache: an executable loaded from it, or not found there (then
        compiled; each is also one of ``all``)."""
        if event == CACHE_HIT:
            self.loaded += 1
        elif event == CACHE_MISS:
            self.missed += 1

    def compiled(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event != COMPILE_EVENT:
            return
        self.all += 1
        if str(kwargs.get("fun_name", ""))[4:-1] in self.user:
            self.count += 1


class JaxAdapter:
    name = "jax"
    modules: tuple[str, ...] = ("jax", "jaxlib")
    extra = "jax"
    variants: tuple[str, ...] = ("eager", "jit")


    def __init__(self) -> None:
        # On a GPU, XLA's client takes 75% of the device's memory as it starts unless told
        # not to: a campaign runs several JAX workers on one GPU (a pool per core when nothing
        # is timed, a data-parallel pool beside the single-device one), and the second would
        # find the memory gone. Read when the first backend starts; the user's choice wins.
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax

        self._device: Any = None
        self._limit: Any = None
        self._compiles = _Compiles()
        logger = logging.getLogger(TRACE_LOGGER)
        logger.addHandler(self._compiles)
        logger.propagate = False  # read, not printed
        # explaining cache misses explains each miss of XLA's persistent cache and each write
        # to it too, as warnings: those are counted (persistent_cache), not printed
        logging.getLogger(CACHE_LOGGER).addFilter(
            lambda record: "persistent compilation cache" not in record.getMessage().lower())
        jax.config.update("jax_explain_cache_misses", True)
        jax.monitoring.register_event_duration_secs_listener(self._compiles.compiled)
        jax.monitoring.register_event_listener(self._compiles.cached)
        self._watch = SettingsWatch()
        self._watch_settings()

    def _watch_settings(self) -> None:
        """Record every change of x64 and the default matmul precision, global
        (jax.config.update) or in a context (jax.default_matmul_precision, enable_x64)."""
        from jax._src import config

        for state in (config.enable_x64, config.default_matmul_precision):
            for hook in ("_update_global_hook", "_update_thread_local_hook"):
                original = getattr(state, hook)

                def watched(value: Any, _original: Any = original, _name: str = state.name,
                            ) -> None:
                    self._watch.record(f"{_name}={value!r}")
                    if _original is not None:
                        _original(value)

                setattr(state, hook, watched)

    def devices(self) -> dict[str, str]:
        import jax

        out = {}
        for kind, platform in PLATFORMS.items():
            try:
                found = jax.devices(platform)
            except RuntimeError:  # no backend for this platform
                continue
            if found:
                out[kind] = f"{len(found)} x {found[0].device_kind}"
        return out

    def setup(self, device: str, policy: Policy, seed: int) -> None:
        import jax

        if device not in self.devices():
            raise Unavailable(f"no {device} visible to jax (jax.devices() has none)")
        if policy.gpu_only and device != "gpu":
            raise Unsupported(f"{policy.name} applies to NVIDIA GPUs only")
        self._device = jax.local_devices(backend=PLATFORMS[device])[0]  # this process's own
        # JAX silently turns float64 into float32 unless x64 is on: switch it for fp64 only,
        # so float32 runs see JAX's ordinary defaults, then check the policy held.
        self._watch.begin()
        jax.config.update("jax_enable_x64", policy.dtype == "float64")
        jax.config.update("jax_default_matmul_precision", _matmul(policy))
        self.verify_policy(policy)
        self._watch.start()
        # JAX has no global RNG state; workloads take explicit keys derived from the seed.

    def verify_policy(self, policy: Policy) -> None:
        import jax
        import jax.numpy as jnp

        probe = jnp.asarray(np.zeros(2, dtype=numpy_dtype(policy)))
        if str(probe.dtype) != policy.dtype:
            raise PolicyNotApplied(f"jax made {probe.dtype} from {policy.dtype} input "
                                   f"(jax_enable_x64 is {getattr(jax.config, 'jax_enable_x64')})")  # noqa: B009
        found = getattr(jax.config, "jax_default_matmul_precision")  # noqa: B009 (untyped flag)
        if found != _matmul(policy):
            raise PolicyNotApplied(f"jax matmul precision is {found}, the {policy.name} policy "
                                   f"needs {_matmul(policy)}")
        x64 = bool(getattr(jax.config, "jax_enable_x64"))  # noqa: B009 (untyped flag)
        if x64 != (policy.dtype == "float64"):
            raise PolicyNotApplied(f"jax_enable_x64 is {x64}, the {policy.name} policy needs "
                                   f"{policy.dtype == 'float64'}")
        self._watch.check(self.name, policy)

    def set_threads(self, threads: int) -> None:
        # XLA sizes its CPU pool from the worker's affinity mask (set before jax started);
        # NumPy's BLAS, used around the step, gets the same count
        self._limit = threading_.limit_blas(threads)

    def threads(self) -> dict[str, Any]:
        import jax

        # the CPU client (and its pool) exists from here, even where a GPU is the default
        # device and the step never touches the CPU client
        jax.device_put(np.zeros(1), jax.devices("cpu")[0]).block_until_ready()
        return {"xla_cpu_pool": threading_.count_named(XLA_POOL),
                **threading_.blas_threads()}

    def compile_events(self) -> int:
        return self._compiles.count

    def backend_compiles(self) -> int:
        return self._compiles.all

    def persistent_cache(self) -> tuple[int, int]:
        """Compilations XLA's persistent cache served, and those it compiled, so far (both 0
        while the campaign keeps the cache off: cache_plan.py)."""
        return self._compiles.loaded, self._compiles.missed

    def census(self, root: Any) -> tuple[int, str] | None:
        """Flax variables (``{"params": ...}`` collections) behind the trainer. Not inside an
        optax state: a momentum or moment slot of Flax variables has their tree, ``params``
        included, and is no parameter."""
        import jax

        found = reachable(root, lambda o: isinstance(o, dict) and "params" in o
                          and all(hasattr(leaf, "dtype") for leaf in jax.tree.leaves(o["params"])),
                          skip=lambda o: isinstance(o, jax.Array)
                          or type(o).__module__.split(".")[0] == "optax")
        if not found:
            return None
        total = sum(int(leaf.size) for v in found for leaf in jax.tree.leaves(v["params"]))
        return total, f"{len(found)} Flax variable collection(s)"

    def asarray(self, array: np.ndarray) -> Any:
        import jax

        return jax.device_put(array, self._device)

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.array(value, copy=True)

    def take(self, value: Any, rows: np.ndarray) -> Any:
        """The rows selected on the device, by index: only the indices cross from the host."""
        import jax

        return value[jax.device_put(rows, self._device)]

    def on_device(self, value: Any) -> bool:
        platform = self._device.platform
        return all(d.platform == platform for d in value.devices())

    def concrete_types(self) -> tuple[type, ...]:
        """A timed call's results: JAX's concrete array type (never a tracer or a wrapper),
        found by a transfer, which compiles nothing."""
        import jax

        return (type(jax.device_put(np.zeros((), np.float32), self._device)),)

    def sync(self, value: Any) -> None:
        import jax

        jax.block_until_ready(value)

    def compile(self, fn: Callable[..., Any], variant: str,
                donate: tuple[int, ...] = ()) -> Compiled:
        import jax

        if variant == "eager":
            if donate:
                raise Unsupported("buffer donation needs jax.jit: eager JAX runs op by op")
            return Compiled(fn, variant, name=getattr(fn, "__name__", ""))
        if variant != "jit":
            raise Unsupported(f"jax has no {variant} variant")
        counter = TraceCounter(fn)  # the Python body runs once per trace
        return Compiled(jax.jit(counter, donate_argnums=donate), variant,
                        traces=lambda: counter.count, name=getattr(fn, "__name__", ""))

    def join_at_start(self, rank: int, world: int, dp: dict[str, Any]) -> None:
        """One process of a job of several (a node each): jax.distributed's coordinator at
        the pool's address, CPU collectives over gloo; before any JAX computation, as
        jax.distributed requires. A process that owns every device joins nothing."""
        import jax

        if world == 1:
            return

        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=f"{dp['master_addr']}:{dp['master_port']}",
                                   num_processes=world, process_id=rank,
                                   initialization_timeout=int(dp["timeout_s"]))

    def parallel(self, case: Any, loss: Callable[..., Any], dp: dict[str, Any]) -> Any:
        from pytest_mlbench.frameworks.distributed import jax_mesh

        return jax_mesh(case, loss, dp["workers"])

    def warm_up_compiler(self, device: str = "cpu") -> None:
        """XLA's first compilation in this process, for the device the cases run on (its
        start-up is not a case's compile)."""
        import jax
        import jax.numpy as jnp

        x = jax.device_put(jnp.ones(8), jax.local_devices(backend=PLATFORMS[device])[0])
        jax.jit(lambda x: jnp.tanh(x) * 2 + 1)(x).block_until_ready()

    def matmul_gflops(self, dtype: str, n: int, repeats: int) -> float | None:
        import jax
        import jax.numpy as jnp

        with self._watch.paused(), jax.enable_x64(dtype == "float64"):
            rng = np.random.default_rng(0)
            a, b = (jnp.asarray(rng.standard_normal((n, n)), dtype=dtype) for _ in range(2))
            mm = jax.jit(jnp.matmul)
            return best_gflops(lambda: mm(a, b), jax.block_until_ready, 2.0 * n**3, repeats)

    def peak_memory(self, run: Callable[[], None]) -> tuple[int, str] | None:
        run()
        stats = self._device.memory_stats() if self._device is not None else None
        if not stats or "peak_bytes_in_use" not in stats:
            return None  # the CPU client keeps no statistics
        return int(stats["peak_bytes_in_use"]), "process"  # JAX cannot reset its peak

    def versions(self) -> dict[str, str]:
        return package_versions("jax", "jaxlib", "chex", "ml_dtypes", "optax", "flax")


def _matmul(policy: Policy) -> str:
    return "tensorfloat32" if policy.allow_tf32 else "highest"
