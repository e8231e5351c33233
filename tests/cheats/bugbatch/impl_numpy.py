"""The mean's 1/batch missing from the gradient."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


class Broken(SPECS.MlpNumpy):  # type: ignore[misc,name-defined]
    def gradient(self, h: np.ndarray, z: np.ndarray) -> dict[str, np.ndarray]:
        return {k: v * len(self.x) for k, v in super().gradient(h, z).items()}


def build(case: Any) -> Any:
    return Broken(case)
