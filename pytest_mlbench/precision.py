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
    meaningful on NVIDIA GPUs).
    """

    name: str
    dtype: str
    allow_tf32: bool
    gpu_only: bool
    summary: str
    compute: str = ""

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
}


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
