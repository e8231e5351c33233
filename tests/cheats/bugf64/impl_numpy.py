"""The parameters widened to float64 by the first step of an fp32 case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


class Broken(SPECS.MlpNumpy):  # type: ignore[misc,name-defined]
    def step(self) -> np.ndarray:
        self.w1, self.w2 = self.w1.astype(np.float64), self.w2.astype(np.float64)
        return super().step()


def build(case: Any) -> Any:
    return Broken(case)
