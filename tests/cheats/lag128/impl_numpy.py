"""The seed MLP's honest NumPy trainer; params() a step behind after 128 steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
HONEST_STEPS = 128


class Behind(SPECS.MlpNumpy):  # type: ignore[misc,name-defined]
    def __init__(self, case: Any) -> None:
        super().__init__(case)
        self.calls, self.previous = 0, super().params()

    def params(self) -> Any:
        return self.previous if self.calls > HONEST_STEPS else super().params()

    def step(self) -> Any:
        self.calls += 1
        self.previous = super().params()
        return super().step()


def build(case: Any) -> Any:
    return Behind(case)
