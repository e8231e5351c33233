"""Data-parallel loss of the seed MLP in JAX: the single-device implementation's own loss_fn."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_mlbench.catalogue import load_module

IMPL = Path(__file__).resolve().parents[1] / "mlp" / "impl_jax.py"


def make_loss(dims: Mapping[str, int]) -> Callable[..., Any]:
    """``loss(params, x=..., y=...)``: mean BCE over whatever batch it is given."""
    return load_module(IMPL, "mlbench_suite_mlp_jax").loss_fn  # type: ignore[no-any-return]
