"""The honest trainer, and a second tf.function step on half the batch traced in build();
after the checked steps the trainer switches to it, on the first half of each step's batch.
Nothing traces while timed."""

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
        self.half = tf.function(self._sgd_step).get_concrete_function(*self.halves())
        self.calls = 0

    def halves(self) -> tuple[Any, Any]:
        """The first half of the batch of the step being called."""
        batch = self.batch()
        n = batch["x"].shape[0] // 2
        return batch["x"][:n], batch["y"][:n]

    def step(self) -> Any:
        self.calls += 1
        if self.calls <= SPECS.CHECKED:
            return super().step()
        return self.half(*self.halves())


def build(case: Any) -> Sliced:
    return Sliced(case)
