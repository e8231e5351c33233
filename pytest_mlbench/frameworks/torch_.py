"""PyTorch: eager and torch.compile (inductor); CUDA selection and synchronisation."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_mlbench.errors import PolicyNotApplied, Unavailable, Unsupported
from pytest_mlbench.frameworks.base import Compiled, package_versions
from pytest_mlbench.precision import Policy


class TorchAdapter:
    name = "torch"
    modules: tuple[str, ...] = ("torch",)
    extra = "torch"
    variants: tuple[str, ...] = ("eager", "jit")

    def __init__(self) -> None:
        self._device: Any = None
        self._dtype: Any = None
        # A session-private inductor cache (unless the user chose one): compiled kernels from
        # earlier runs would otherwise make compile_s report a warm cache, not a compile.
        if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
            cache = tempfile.mkdtemp(prefix="mlbench-inductor-")
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
            atexit.register(shutil.rmtree, cache, ignore_errors=True)

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
        self._dtype = getattr(torch, policy.dtype)
        matmul = "high" if policy.allow_tf32 else "highest"
        torch.set_float32_matmul_precision(matmul)
        torch.backends.cudnn.allow_tf32 = policy.allow_tf32
        if torch.get_float32_matmul_precision() != matmul:
            raise PolicyNotApplied(f"torch float32 matmul precision is not {matmul}")
        if torch.backends.cuda.matmul.allow_tf32 != policy.allow_tf32:
            raise PolicyNotApplied(f"torch TF32 matmuls are not {'on' if policy.allow_tf32 else 'off'}")
        torch.manual_seed(seed)
        # Each case compiles from scratch, so its reported compile time is its own, and not
        # from inductor's on-disk caches either: JAX and TF keep none by default, and a warm
        # cache would report a second run's compile time as near zero.
        torch._dynamo.reset()
        torch._inductor.config.fx_graph_cache = False
        torch._functorch.config.enable_autograd_cache = False

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
        return value.numpy()

    def sync(self, value: Any) -> None:
        import torch

        if self._device is not None and self._device.type == "cuda":
            torch.cuda.synchronize(self._device)

    def compile(self, fn: Callable[..., Any], variant: str) -> Compiled:
        import torch

        if variant == "eager":
            return Compiled(fn, variant, name=getattr(fn, "__name__", ""))
        if variant != "jit":
            raise Unsupported(f"torch has no {variant} variant")
        from torch._inductor.compile_fx import compile_fx

        graphs = [0]

        def counting_inductor(gm: Any, example_inputs: Any) -> Any:
            graphs[0] += 1  # one call per graph dynamo hands to the backend
            return compile_fx(gm, example_inputs)

        return Compiled(torch.compile(fn, backend=counting_inductor),
                        variant, traces=lambda: graphs[0],
                        guard=lambda: torch.compiler.set_stance("fail_on_recompile"),
                        name=getattr(fn, "__name__", ""))

    def peak_memory(self, run: Callable[[], None]) -> tuple[int, str] | None:
        import torch

        if self._device is None or self._device.type != "cuda":
            return None  # the CPU allocator keeps no statistics
        torch.cuda.reset_peak_memory_stats(self._device)
        run()
        return int(torch.cuda.max_memory_allocated(self._device)), "step"

    def versions(self) -> dict[str, str]:
        out = package_versions("torch")
        import torch

        if torch.cuda.is_available():
            out["cuda"] = str(torch.version.cuda)
            out["cudnn"] = str(torch.backends.cudnn.version())
        return out

    def threads(self) -> dict[str, Any]:
        import torch

        return {"torch.get_num_threads": torch.get_num_threads(),
                "torch.get_num_interop_threads": torch.get_num_interop_threads()}
