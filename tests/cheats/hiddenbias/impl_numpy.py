"""After the checked steps a bias joins the model and trains, never reported by params()."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


class HiddenBias(SPECS.LinNumpy):  # type: ignore[misc,name-defined]
    def __init__(self, case: Any) -> None:
        super().__init__(case)
        self.b = np.zeros((1, 1), self.w.dtype)

    def loss_and_grads(self) -> Any:
        r = self.x @ self.w + self.b - self.y
        return 0.5 * np.mean(r * r), {"w": self.x.T @ r / len(r)}

    def cheat(self) -> Any:
        r = self.x @ self.w + self.b - self.y
        self.w = self.w - self.lr * (self.x.T @ r / len(r))
        self.b = self.b - self.lr * r.mean(keepdims=True)
        return 0.5 * np.mean(r * r)


def build(case: Any) -> Any:
    return HiddenBias(case)
