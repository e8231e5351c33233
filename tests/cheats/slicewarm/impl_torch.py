"""The honest step, and a second torch.compile'd step on half the batch warmed up in build();
after the checked steps the trainer switches to it. Nothing compiles while timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file, sgd_step, torch_value_and_grad

CHEATS = Path(__file__).parents[1]
SPECS = load_suite_file(CHEATS / "specs.py")
HONEST = load_suite_file(CHEATS / "honest" / "impl_torch.py")


def build(case: Any) -> Any:
    step = sgd_step(HONEST.loss_fn, torch_value_and_grad, case.learning_rate)
    return SPECS.HalfBatch(HONEST.build(case), torch.compile(step, backend="eager"),
                           warm=lambda result: None)
