"""The step called as it is for the jit variant: op by op, labelled jit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax

from pytest_mlbench import load_suite_file, sgd_step

HONEST = load_suite_file(Path(__file__).parents[1] / "honest" / "impl_jax.py")


class Trainer:
    def __init__(self, case: Any) -> None:
        self.step_fn = sgd_step(HONEST.loss_fn, jax.value_and_grad, case.learning_rate)
        self.p, self.batch = dict(case.params), case.batch

    def params(self) -> Any:
        return self.p

    def loss_and_grads(self) -> Any:
        loss, g, _ = self.step_fn(self.p, self.batch()["x"], self.batch()["y"])
        return loss, g

    def step(self) -> Any:
        loss, _, self.p = self.step_fn(self.p, self.batch()["x"], self.batch()["y"])
        return loss


def build(case: Any) -> Trainer:
    return Trainer(case)
