"""The seed MLP's NumPy trainer, honest for the checked steps, float64 inside afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
F64 = load_suite_file(Path(__file__).parents[1] / "f64math" / "impl_numpy.py")


class Widening(SPECS.MlpNumpy):  # type: ignore[misc,name-defined]
    steps = 0

    def loss_and_grads(self) -> tuple[Any, dict[str, np.ndarray]]:
        if self.steps <= SPECS.CHECKED:
            return super().loss_and_grads()
        return F64.value_and_grad({"w1": self.w1, "w2": self.w2}, {"x": self.x, "y": self.y})

    def step(self) -> Any:
        self.steps += 1
        return super().step()


def build(case: Any) -> Any:
    return Widening(case)
