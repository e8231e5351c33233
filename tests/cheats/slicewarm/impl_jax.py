"""The honest step, and a second jitted step on half the batch compiled and warmed up in
build(); after the checked steps the trainer switches to it. Nothing compiles while timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax

from pytest_mlbench import load_suite_file, sgd_step

CHEATS = Path(__file__).parents[1]
SPECS = load_suite_file(CHEATS / "specs.py")
HONEST = load_suite_file(CHEATS / "honest" / "impl_jax.py")


def build(case: Any) -> Any:
    half = jax.jit(sgd_step(HONEST.loss_fn, jax.value_and_grad, case.learning_rate))
    return SPECS.HalfBatch(HONEST.build(case), half, warm=jax.block_until_ready)
