"""Seed MLP in PyTorch with torch.func: one functional step, eager or under torch.compile."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from pytest_mlbench import FunctionalSGD, torch_value_and_grad


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    z = torch.tanh(x @ p["w1"]) @ p["w2"]
    return torch.mean(F.softplus(z) - y * z)


def build(case: Any) -> FunctionalSGD:
    return FunctionalSGD(case, loss_fn, torch_value_and_grad)


def data_parallel_loss(case: Any) -> Any:
    """The same loss over whatever shard a data-parallel worker holds (a mean: the engine's
    all-reduce averages the shards' gradients into the global batch's)."""
    return loss_fn
