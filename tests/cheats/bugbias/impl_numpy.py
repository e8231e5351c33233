"""A bias the spec does not declare, reported by params()."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


class Broken(SPECS.MlpNumpy):  # type: ignore[misc,name-defined]
    def params(self) -> dict[str, np.ndarray]:
        return {**super().params(), "b1": np.zeros(128, np.float32)}


def build(case: Any) -> Any:
    return Broken(case)
