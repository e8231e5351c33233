"""After the checked steps, step() applies the last checked step's gradient again and returns
that step's loss: no forward, no backward."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


class Stale(SPECS.LinNumpy):  # type: ignore[misc,name-defined]
    def honest_step(self) -> Any:
        self.loss, self.g = self.loss_and_grads()
        self.w = self.w - self.lr * self.g["w"]
        return self.loss

    def cheat(self) -> Any:
        self.w = self.w - self.lr * self.g["w"]
        return self.loss


def build(case: Any) -> Any:
    return Stale(case)
