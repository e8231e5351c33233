"""JAX: eager (op-by-op dispatch) and jax.jit; explicit device placement and x64 handling."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_mlbench.errors import PolicyNotApplied, Unavailable, Unsupported
from pytest_mlbench.frameworks.base import Compiled, TraceCounter, package_versions
from pytest_mlbench.precision import Policy

PLATFORMS = {"cpu": "cpu", "gpu": "gpu", "tpu": "tpu"}


class JaxAdapter:
    name = "jax"
    modules: tuple[str, ...] = ("jax", "jaxlib")
    extra = "jax"
    variants: tuple[str, ...] = ("eager", "jit")

    def __init__(self) -> None:
        self._device: Any = None

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
        import jax.numpy as jnp

        if device not in self.devices():
            raise Unavailable(f"no {device} visible to jax (jax.devices() has none)")
        if policy.gpu_only and device != "gpu":
            raise Unsupported(f"{policy.name} applies to NVIDIA GPUs only")
        self._device = jax.devices(PLATFORMS[device])[0]
        # JAX silently turns float64 into float32 unless x64 is on: switch it for fp64 only,
        # so float32 runs see JAX's ordinary defaults, then check the policy held.
        jax.config.update("jax_enable_x64", policy.dtype == "float64")
        matmul = "tensorfloat32" if policy.allow_tf32 else "highest"
        jax.config.update("jax_default_matmul_precision", matmul)
        probe = jnp.asarray(np.zeros(2, dtype=_np_dtype(policy)))
        if str(probe.dtype) != policy.dtype:
            raise PolicyNotApplied(f"jax made {probe.dtype} from {policy.dtype} input")
        if getattr(jax.config, "jax_default_matmul_precision") != matmul:  # noqa: B009 (untyped flag)
            raise PolicyNotApplied(f"jax matmul precision is not {matmul}")
        # JAX has no global RNG state; workloads take explicit keys derived from the seed.

    def asarray(self, array: np.ndarray) -> Any:
        import jax

        return jax.device_put(array, self._device)

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def sync(self, value: Any) -> None:
        import jax

        jax.block_until_ready(value)

    def compile(self, fn: Callable[..., Any], variant: str) -> Compiled:
        import jax

        if variant == "eager":
            return Compiled(fn, variant, name=getattr(fn, "__name__", ""))
        if variant != "jit":
            raise Unsupported(f"jax has no {variant} variant")
        counter = TraceCounter(fn)  # the Python body runs once per trace
        return Compiled(jax.jit(counter), variant, traces=lambda: counter.count,
                        name=getattr(fn, "__name__", ""))

    def peak_memory(self, run: Callable[[], None]) -> tuple[int, str] | None:
        run()
        stats = self._device.memory_stats() if self._device is not None else None
        if not stats or "peak_bytes_in_use" not in stats:
            return None  # the CPU client keeps no statistics
        return int(stats["peak_bytes_in_use"]), "process"  # JAX cannot reset its peak

    def versions(self) -> dict[str, str]:
        return package_versions("jax", "jaxlib", "chex", "ml_dtypes")

    def threads(self) -> dict[str, Any]:
        return {"XLA_FLAGS": os.environ.get("XLA_FLAGS", "unset")}


def _np_dtype(policy: Policy) -> Any:
    from pytest_mlbench.precision import numpy_dtype

    return numpy_dtype(policy)
