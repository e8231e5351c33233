"""Precision policies: what each name means, and the NumPy dtype that carries it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_mlbench.errors import Unsupported


@dataclass(frozen=True)
class Policy:
    """One precision policy, applied identically to every framework.

    Params, data and optimizer state are stored at ``dtype``; arithmetic runs at ``dtype`` too
    unless ``compute`` names another (mixed precision: the framework's own machinery puts
    the matmuls, convolutions and their gradients there, and the update stays at ``dtype``);
    ``allow_tf32`` says whether float32 matmuls may use TensorFloat-32 tensor cores (only
    meaningful on NVIDIA GPUs). ``loss_scale``: training multiplies the loss by a dynamic
    scale before the backward pass and divides the gradients by it before the update, so
    that small gradients do not underflow float16 (0: no loss scaling). Every framework runs
    the same dynamic scaling (torch.amp.GradScaler's and Keras's LossScaleOptimizer's, a
    JAX trainer's own): start at ``loss_scale``, a step whose gradients are not all finite
    is skipped and halves the scale (BACKOFF), GROWTH_INTERVAL finite steps in a row double
    it (GROWTH).
    """

    name: str
    dtype: str
    allow_tf32: bool
    gpu_only: bool
    summary: str
    compute: str = ""
    loss_scale: float = 0.0

    @property
    def compute_dtype(self) -> str:
        """The dtype the matmuls run at: ``compute`` where it is named, else ``dtype``."""
        return self.compute or self.dtype

    @property
    def mixed(self) -> bool:
        """Storage and compute differ (master weights at ``dtype``, compute at ``compute``)."""
        return bool(self.compute) and self.compute != self.dtype


POLICIES: dict[str, Policy] = {
    "fp64": Policy("fp64", "float64", False, False, "float64 everywhere"),
    "fp32": Policy("fp32", "float32", False, False, "strict float32 (TF32 off)"),
    "tf32": Policy("tf32", "float32", True, True, "float32 storage, TF32 matmuls (NVIDIA GPU)"),
    "bf16": Policy("bf16", "bfloat16", False, False, "bfloat16 storage and arithmetic"),
    "amp": Policy("amp", "float32", False, False, "mixed precision: float32 master weights, "
                  "data and optimizer state, bfloat16 compute (torch.autocast, a JAX cast "
                  "policy, TF casts in the tape)", compute="bfloat16"),
    # float16's 5 exponent bits underflow small gradients: the start 2^12 keeps a gradient of
    # 1e-8 normal and one of 16 finite, so that no step of the checked start is skipped (a
    # skipped step is not the reference's algorithm, and the trajectory check says so)
    "amp16": Policy("amp16", "float32", False, False, "mixed precision in float16: float32 "
                    "master weights, data and optimizer state, float16 compute, dynamic loss "
                    "scaling (torch.autocast with GradScaler, Keras's mixed_float16 with "
                    "LossScaleOptimizer, a JAX cast policy with a loss scale)",
                    compute="float16", loss_scale=2.0 ** 12),
}
GROWTH, BACKOFF, GROWTH_INTERVAL = 2.0, 0.5, 2000  # the dynamic loss scale's rule (see Policy)


def numpy_dtype(policy: Policy) -> Any:
    """The NumPy dtype for a policy; bfloat16 comes from ml_dtypes (a JAX and TF dependency)."""
    import numpy as np  # here, not at import: the plugin's start-up loads no NumPy

    if policy.dtype != "bfloat16":
        return np.dtype(policy.dtype)
    try:
        import ml_dtypes
    except ImportError as exc:  # pragma: no cover - ml_dtypes ships with jax and tensorflow
        raise Unsupported("bf16 needs the ml_dtypes package (installed with jax or tensorflow)") from exc
    return np.dtype(ml_dtypes.bfloat16)


def dtype_name(array: Any) -> str:
    """Canonical dtype name of an array from any framework, as the policies spell it."""
    name = str(getattr(array, "dtype", type(array).__name__))
    for prefix in ("torch.", "<dtype: '"):
        name = name.removeprefix(prefix)
    return name.rstrip("'>")
