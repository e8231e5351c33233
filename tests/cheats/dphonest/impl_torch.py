"""Honest seed MLP in torch: single-device through torch.func, data-parallel through DDP."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from pytest_mlbench import FunctionalSGD, torch_value_and_grad


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    z = torch.tanh(x @ p["w1"]) @ p["w2"]
    return torch.mean(F.softplus(z) - y * z)


def build(case: Any) -> Any:
    return FunctionalSGD(case, loss_fn, torch_value_and_grad)


def data_parallel_loss(case: Any) -> Any:
    return loss_fn
