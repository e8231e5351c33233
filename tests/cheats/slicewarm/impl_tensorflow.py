"""The honest trainer, and a second tf.function step on half the batch traced in build();
after the checked steps the trainer switches to it. Nothing traces while timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf

from pytest_mlbench import load_suite_file

CHEATS = Path(__file__).parents[1]
SPECS = load_suite_file(CHEATS / "specs.py")
HONEST = load_suite_file(CHEATS / "honest" / "impl_tensorflow.py")


class Sliced(HONEST.Trainer):  # type: ignore[misc, name-defined]
    def __init__(self, case: Any) -> None:
        super().__init__(case)
        n = self.x.shape[0] // 2
        self.hx, self.hy = self.x[:n], self.y[:n]
        self.half = tf.function(self._sgd_step).get_concrete_function(self.hx, self.hy)
        self.calls = 0

    def step(self) -> Any:
        self.calls += 1
        if self.calls <= SPECS.CHECKED:
            return super().step()
        return self.half(self.hx, self.hy)


def build(case: Any) -> Sliced:
    return Sliced(case)
