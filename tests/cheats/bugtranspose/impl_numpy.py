"""w1's gradient transposed (square, so no shape error warns)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


class Broken(SPECS.MlpNumpy):  # type: ignore[misc,name-defined]
    def gradient(self, h: np.ndarray, z: np.ndarray) -> dict[str, np.ndarray]:
        g = super().gradient(h, z)
        return {"w1": g["w1"].T.copy(), "w2": g["w2"]}


def build(case: Any) -> Any:
    return Broken(case)
