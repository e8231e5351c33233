"""Diverges: the third step's loss is NaN."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


class Broken(SPECS.MlpNumpy):  # type: ignore[misc,name-defined]
    steps = 0

    def step(self) -> np.ndarray:
        self.steps += 1
        if self.steps == 2:
            self.w2 = self.w2 * np.float32(np.nan)
        return super().step()


def build(case: Any) -> Any:
    return Broken(case)
