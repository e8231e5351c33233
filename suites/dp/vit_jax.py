"""Data-parallel loss of the ViT in JAX: the single-device implementation's own loss_fn
on the spec's model tree."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_mlbench.catalogue import load_module

IMPL = Path(__file__).resolve().parents[1] / "vit" / "impl_jax.py"


def make_loss(dims: Mapping[str, int]) -> Callable[..., Any]:
    """``loss(flat_params, x=..., y=...)`` over whatever batch (shard) it is given."""
    impl = load_module(IMPL, "mlbench_suite_vit_jax")
    patch, heads = dims["patch"], impl.spec.num_heads(dims)

    def loss(flat: dict[str, Any], x: Any, y: Any) -> Any:
        return impl.loss_fn(impl.spec.to_model(flat), x, y, patch=patch, heads=heads)

    return loss
