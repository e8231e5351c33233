"""The honest step, whose batch is repeated twice after the checked steps (the same mean, a
new shape)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "honest" / "impl_tensorflow.py")
CHECKED = 3


class Shrinking:
    def __init__(self, case: Any) -> None:
        self.inner, self.calls, self.case = HONEST.build(case), 0, case
        self.params, self.loss_and_grads = self.inner.params, self.inner.loss_and_grads

    def step(self) -> Any:
        self.calls += 1
        if self.calls > CHECKED:  # each step's batch, repeated twice
            self.case.feed({k: tf.concat([v, v], 0) for k, v in self.case.batch().items()})
        return self.inner.step()


def build(case: Any) -> Shrinking:
    return Shrinking(case)
