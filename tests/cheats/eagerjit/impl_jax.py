"""The honest step, secretly under jax.jit in the eager variant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax

from pytest_mlbench import StepTrainer, load_suite_file, sgd_step

HONEST = load_suite_file(Path(__file__).parents[1] / "honest" / "impl_jax.py")


def build(case: Any) -> StepTrainer:
    return StepTrainer(case, jax.jit(sgd_step(HONEST.loss_fn, jax.value_and_grad,
                                              case.learning_rate)))
