"""After the checked steps, step() returns a loss and does nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


class Noop(SPECS.LinNumpy):  # type: ignore[misc,name-defined]
    def cheat(self) -> Any:
        return self.loss_and_grads()[0] * 0


def build(case: Any) -> Any:
    return Noop(case)
