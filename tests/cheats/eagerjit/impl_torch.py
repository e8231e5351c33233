"""The honest step, secretly under torch.compile in the eager variant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import StepTrainer, load_suite_file, sgd_step, torch_value_and_grad

HONEST = load_suite_file(Path(__file__).parents[1] / "honest" / "impl_torch.py")


def build(case: Any) -> StepTrainer:
    step = sgd_step(HONEST.loss_fn, torch_value_and_grad, case.learning_rate)
    return StepTrainer(case, torch.compile(step, backend="eager"))
