"""After the checked steps the parameters become float64 (as a float64 constant in an update
makes them): every later step computes at twice the precision, and twice the cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


class Drifting(SPECS.LinNumpy):  # type: ignore[misc,name-defined]
    def cheat(self) -> Any:
        self.w = self.w.astype(np.float64)
        return self.honest_step()


def build(case: Any) -> Any:
    return Drifting(case)
