"""Its own start: w1 scaled by 1.0001."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


class Broken(SPECS.MlpNumpy):  # type: ignore[misc,name-defined]
    def __init__(self, case: Any) -> None:
        super().__init__(case)
        self.w1 = self.w1 * np.float32(1.0001)


def build(case: Any) -> Any:
    return Broken(case)
