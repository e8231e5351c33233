"""PyTorch: eager and torch.compile (inductor); CUDA selection and synchronisation. The xla mode
(torch on torch_xla's XLA device) is frameworks/torch_xla_.py, made here (``for_mode``)."""

from __future__ import annotations

import atexit
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_mlbench import owned
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

RECOMPILE_LIMIT = 256  # dynamo entries a code object may keep (see setup)


def share_precompiled_headers() -> None:
    """inductor's precompiled header (a ~150 MB ``.gch`` of ATen's vector headers, 4-5 s of
    g++ on a 2-core host) beside the rest of its cache, in TORCHINDUCTOR_CACHE_DIR. inductor
    puts it under the temporary folder instead (``codecache._HEADER_DIR``, from
    ``tempfile.gettempdir()`` at import): a worker's temporary folder is its session's, so
    every session built it again even where the sessions shared a compile cache, and a
    process with the system's temporary folder left one in /tmp for good. The header's file
    name is a hash of its preprocessed text, flags and compiler, and it is built under a lock,
    so sessions that share the folder share it safely. A torch without the attribute keeps
    its own place."""
    from torch._inductor import codecache

    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if cache and hasattr(codecache, "_HEADER_DIR") and hasattr(codecache, "_HEADER_LOCK_DIR"):
        codecache._HEADER_DIR = os.path.join(cache, "precompiled_headers")
        codecache._HEADER_LOCK_DIR = os.path.join(codecache._HEADER_DIR, "locks")


class TorchAdapter:
    name = "torch"
    modules: tuple[str, ...] = ("torch",)
    extra = "torch"
    variants: tuple[str, ...] = ("eager", "jit", "xla")
    # a mode that needs more than torch: its modules (checked without importing them) and how
    # to install them (frameworks.missing_reason; torch_xla is built against one torch)
    modes_need: dict[str, tuple[tuple[str, ...], str]] = {
        "xla": (("torch_xla",), "tox -e bench-xla installs it with the torch it was built "
                                "against (constraints-xla.txt)")}

    def __init__(self) -> None:
        self._device: Any = None
        self._limit: Any = None
        self._watch = SettingsWatch()
        self._torchscript = 0
        self._threads: int | None = None  # the session's, for the xla mode's XLA pool
        self._xla: Any = None  # the xla mode's adapter (for_mode), made on first use
        # Compile caches on, in the folder the campaign sets (TORCHINDUCTOR_CACHE_DIR: the
        # compile cache kept across runs, or the session's own), which every worker shares:
        # a graph one process compiled the next loads (persistent_cache counts which).
        if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
            cache = owned.mkdtemp("mlbench-inductor-", "a torch worker's inductor cache")
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
            atexit.register(owned.discard, cache)

    def for_mode(self, mode: str) -> Any:
        """The adapter a case of ``mode`` runs through: this one, or for ``xla`` torch on
        torch_xla's device (frameworks/torch_xla_.py), one a worker, sharing this one's
        settings watch, thread count and compile counts."""
        if mode != "xla":
            return self
        if self._xla is None:
            from pytest_mlbench.frameworks.torch_xla_ import TorchXla

            self._xla = TorchXla(self)
        return self._xla

    def devices(self) -> dict[str, str]:
        import torch

        out = {"cpu": "host CPU"}
        if torch.cuda.is_available():
            out["gpu"] = f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
        return out

    def setup(self, device: str, policy: Policy, seed: int) -> None:
        import torch

        if device not in self.devices():
            why = " (torch.cuda.is_available() is False)" if device == "gpu" else ""
            raise Unavailable(f"no {device} visible to torch{why}")
        if policy.gpu_only and device != "gpu":
            raise Unsupported(f"{policy.name} applies to NVIDIA GPUs only")
        self._device = torch.device("cuda" if device == "gpu" else "cpu")
        self._watch_setters()
        self._count_torchscript()
        self._watch.begin()
        torch.set_float32_matmul_precision("high" if policy.allow_tf32 else "highest")
        torch.backends.cudnn.allow_tf32 = policy.allow_tf32
        self.verify_policy(policy)
        self._watch.start()
        torch.manual_seed(seed)
        # Each case traces from scratch: its torch.compile has a backend of its own (case
        # counts its graphs), and dynamo's entries for a code object are kept per backend, so a
        # case never runs another's. No reset here: a group may hold two compiled cases of one
        # worker (jit and jit+sdpa), built before either is timed, and resetting for the second
        # wiped the first's code, which then compiled again while timed. Every case of the
        # worker keeps an entry for the shared step code (builders/torch_.py Trainer), hence
        # the limit, well above the cases one worker serves (8 by default).
        torch._dynamo.config.recompile_limit = RECOMPILE_LIMIT
        torch._inductor.config.fx_graph_cache = True
        torch._functorch.config.enable_autograd_cache = True

    def _watch_setters(self) -> None:
        """Record every call of the setters behind torch.set_float32_matmul_precision and
        torch.backends.cuda.matmul.allow_tf32 (both look them up on torch._C when called)."""
        import torch

        for name in ("_set_float32_matmul_precision", "_set_cublas_allow_tf32"):
            original = getattr(torch._C, name)
            if getattr(original, "mlbench_watched", False):
                continue

            def watched(value: Any, _original: Any = original, _name: str = name) -> Any:
                self._watch.record(f"torch._C.{_name}({value!r})")
                return _original(value)

            watched.mlbench_watched = True  # type: ignore[attr-defined]
            setattr(torch._C, name, watched)

    def verify_policy(self, policy: Policy) -> None:
        import torch

        matmul = "high" if policy.allow_tf32 else "highest"
        if torch.get_float32_matmul_precision() != matmul:
            raise PolicyNotApplied(f"torch float32 matmul precision is "
                                   f"{torch.get_float32_matmul_precision()}, the {policy.name} "
                                   f"policy needs {matmul}")
        for flag, value in (("torch.backends.cuda.matmul.allow_tf32",
                             torch.backends.cuda.matmul.allow_tf32),
                            ("torch.backends.cudnn.allow_tf32", torch.backends.cudnn.allow_tf32)):
            if value != policy.allow_tf32:
                raise PolicyNotApplied(f"{flag} is {value}, the {policy.name} policy needs "
                                       f"{policy.allow_tf32}")
        self._watch.check(self.name, policy)

    def set_threads(self, threads: int) -> None:
        import torch

        self._threads = threads
        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # already set in this process (it may be set only once)
            pass
        self._limit = threading_.limit_blas(threads)
        if importlib.util.find_spec("torch_xla") is not None:
            # torch's autograd engine sizes its per-device queues at the process's first
            # backward: an XLA device started after it fails every XLA backward (engine.cpp,
            # "device_ready_queues_ INTERNAL ASSERT"), so the xla mode's device starts here,
            # before any case (an eager case's backward included)
            self.for_mode("xla").start()

    def threads(self) -> dict[str, Any]:
        import torch

        return {"torch.get_num_threads": torch.get_num_threads(),
                "torch.interop (1 by policy)": str(torch.get_num_interop_threads()),
                **threading_.blas_threads()}

    def compile_events(self) -> int:
        """Frames dynamo has processed in this process (dynamo.reset keeps this counter), and
        TorchScript compilations (torch.jit.script, torch.jit.trace) since setup."""
        from torch._dynamo.utils import counters

        return int(counters["frames"]["total"]) + self._torchscript

    def persistent_cache(self) -> tuple[int, int]:
        """FX graphs inductor's cache served, and those it compiled (or bypassed), so far."""
        from torch._dynamo.utils import counters

        found = counters["inductor"]
        return (int(found["fxgraph_cache_hit"]),
                int(found["fxgraph_cache_miss"] + found["fxgraph_cache_bypass"]))

    def _count_torchscript(self) -> None:
        """torch.jit.script and torch.jit.trace compile too: count their calls."""
        import torch

        for name in ("script", "trace"):
            original = getattr(torch.jit, name)
            if getattr(original, "mlbench_counted", False):
                continue

            def counted(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                # torch scripts some of its own helpers on first use (the jvp decompositions
                # when torch.func.jvp first runs): only calls from outside torch count
                caller = sys._getframe(1).f_globals.get("__name__", "")
                if caller != "torch" and not caller.startswith("torch."):
                    self._torchscript += 1
                return _original(*args, **kwargs)

            counted.mlbench_counted = True  # type: ignore[attr-defined]
            setattr(torch.jit, name, counted)

    def census(self, root: Any) -> tuple[int, str] | None:
        """Trainable nn.Parameters behind the trainer: in its modules, its optimizer, or
        anywhere else it keeps them."""
        import torch

        found = reachable(root, lambda o: isinstance(o, torch.nn.Parameter | torch.nn.Module),
                          skip=lambda o: isinstance(o, torch.Tensor))
        params: dict[int, Any] = {}
        for obj in found:
            members = obj.parameters() if isinstance(obj, torch.nn.Module) else [obj]
            params.update({id(p): p for p in members if p.requires_grad})
        if not params:
            return None
        return sum(p.numel() for p in params.values()), f"{len(params)} trainable nn.Parameter(s)"

    def asarray(self, array: np.ndarray) -> Any:
        import torch

        if str(array.dtype) == "bfloat16":  # torch cannot read ml_dtypes; the cast is exact
            return torch.from_numpy(array.astype(np.float32)).to(self._device, torch.bfloat16)
        return torch.from_numpy(np.array(array, copy=True)).to(self._device)

    def to_numpy(self, value: Any) -> np.ndarray:
        import torch

        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            import ml_dtypes

            return value.float().numpy().astype(ml_dtypes.bfloat16)
        return np.array(value.numpy(), copy=True)  # .numpy() shares the tensor's memory

    def take(self, value: Any, rows: np.ndarray) -> Any:
        """The rows selected on the device, by index: only the indices cross from the host."""
        import torch

        index = torch.from_numpy(rows).to(self._device, non_blocking=True)
        return value.index_select(0, index)

    def on_device(self, value: Any) -> bool:
        return bool(value.device.type == self._device.type)

    def concrete_types(self) -> tuple[type, ...]:
        """A timed call's results: plain tensors and parameters, no subclass (a subclass's
        hooks could run owed work when converted)."""
        import torch

        return (torch.Tensor, torch.nn.Parameter)

    def sync(self, value: Any) -> None:
        import torch

        if self._device is not None and self._device.type == "cuda":
            torch.cuda.synchronize(self._device)

    def compile(self, fn: Callable[..., Any], variant: str,
                donate: tuple[int, ...] = ()) -> Compiled:
        no_donation(self.name, donate)
        import torch

        if variant == "eager":
            return Compiled(fn, variant, name=getattr(fn, "__name__", ""))
        if variant != "jit":  # xla: for_mode's adapter
            raise Unsupported(f"torch has no {variant} variant")
        from torch._inductor.compile_fx import compile_fx

        share_precompiled_headers()
        graphs = [0]

        def counting_inductor(gm: Any, example_inputs: Any) -> Any:
            graphs[0] += 1  # one call per graph dynamo hands to the backend
            return compile_fx(gm, example_inputs)

        # dynamic=False: a case's graphs are specialised to its own shapes, as its worker's
        # first case's are. Cases share the step's code (builders/torch_.py Trainer), and
        # dynamo's automatic dynamic shapes, kept per code object across backends, traced a
        # later case of other shapes with symbolic sizes: what was timed depended on the cases
        # the worker served before it (cnn after mlp_optim momentum crashed inductor there;
        # docs/journal/2026-11-28-test-line-compile.md)
        return Compiled(torch.compile(fn, backend=counting_inductor, dynamic=False),
                        variant, traces=lambda: graphs[0],
                        guard=lambda: torch.compiler.set_stance("fail_on_recompile"),
                        name=getattr(fn, "__name__", ""))

    def parallel(self, case: Any, loss: Callable[..., Any], dp: dict[str, Any]) -> Any:
        from pytest_mlbench.frameworks.distributed import TorchDDP, TorchSharded

        if case.id.strategy == "dp":
            return TorchDDP(case, loss, dp)
        return TorchSharded(case, loss, dp)

    def warm_up_compiler(self, device: str = "cpu") -> None:
        """inductor's one-time start-up (imports, toolchain checks, its first build: C++ on
        the CPU, Triton on a GPU), on the device the cases run on, so a case's compile time is
        its own graph's, not the worker's first."""
        import torch

        where = "cuda" if device == "gpu" else "cpu"
        share_precompiled_headers()
        torch.compile(lambda x: torch.tanh(x) * 2 + 1)(torch.ones(8, device=where)).sum().item()
        torch._dynamo.reset()

    def matmul_gflops(self, dtype: str, n: int, repeats: int) -> float | None:
        import torch

        device = self._device or torch.device("cpu")
        a, b = (torch.randn(n, n, dtype=getattr(torch, dtype), device=device) for _ in range(2))
        return best_gflops(lambda: a @ b, self.sync, 2.0 * n**3, repeats)

    def peak_memory(self, run: Callable[[], None]) -> tuple[int, str] | None:
        import torch

        if self._device is None or self._device.type != "cuda":
            return None  # the CPU allocator keeps no statistics
        torch.cuda.reset_peak_memory_stats(self._device)
        run()
        return int(torch.cuda.max_memory_allocated(self._device)), "step"

    def versions(self) -> dict[str, str]:
        out = package_versions("torch", "torch-xla")
        import torch

        if torch.cuda.is_available():
            out["cuda"] = str(torch.version.cuda)
            out["cudnn"] = str(torch.backends.cudnn.version())
        return out
