"""Honest torch: torch.func, eager or under torch.compile."""

from __future__ import annotations

from typing import Any

import torch

from pytest_mlbench import FunctionalSGD, torch_value_and_grad


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    r = x @ p["w"] - y
    return 0.5 * torch.mean(r * r)


def build(case: Any) -> Any:
    return FunctionalSGD(case, loss_fn, torch_value_and_grad)
