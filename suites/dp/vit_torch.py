"""Data-parallel loss of the ViT in PyTorch: the single-device implementation's forward on the
spec's model tree, then the spec's mean softmax cross-entropy."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from pytest_mlbench.catalogue import load_module

IMPL = Path(__file__).resolve().parents[1] / "vit" / "impl_torch.py"


def make_loss(dims: Mapping[str, int]) -> Callable[..., Any]:
    """``loss(flat_params, x=..., y=...)`` over whatever batch (shard) it is given."""
    impl = load_module(IMPL, "mlbench_suite_vit_torch")
    patch, heads = dims["patch"], impl.spec.num_heads(dims)

    def loss(flat: dict[str, Any], x: Any, y: Any) -> Any:
        logits = impl.forward(impl.spec.to_model(flat), x, patch=patch, heads=heads)
        return -(y * torch.log_softmax(logits, dim=-1)).sum(dim=-1).mean()

    return loss
