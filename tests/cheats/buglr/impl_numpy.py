"""A learning rate of 1e-3 where the spec says 1e-2 (the seed article's mix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


class Broken(SPECS.MlpNumpy):  # type: ignore[misc,name-defined]
    def __init__(self, case: Any) -> None:
        super().__init__(case)
        self.lr = 1e-3


def build(case: Any) -> Any:
    return Broken(case)
