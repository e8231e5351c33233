"""The eager variant's step, secretly under torch.compile."""

from __future__ import annotations

from typing import Any

import torch

from pytest_mlbench import StepTrainer, sgd_step, torch_value_and_grad


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    r = x @ p["w"] - y
    return 0.5 * torch.mean(r * r)


def build(case: Any) -> StepTrainer:
    step = sgd_step(loss_fn, torch_value_and_grad, case.learning_rate)
    return StepTrainer(case, torch.compile(step, backend="eager"))
