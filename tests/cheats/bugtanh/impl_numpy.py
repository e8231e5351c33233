"""The tanh derivative dropped from the backward pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


class Broken(SPECS.MlpNumpy):  # type: ignore[misc,name-defined]
    def gradient(self, h: np.ndarray, z: np.ndarray) -> dict[str, np.ndarray]:
        dz = (0.5 * (1 + np.tanh(0.5 * z)) - self.y) / z.shape[0]
        return {"w1": self.x.T @ (dz @ self.w2.T), "w2": h.T @ dz}


def build(case: Any) -> Any:
    return Broken(case)
