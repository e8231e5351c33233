"""After the checked steps, step() runs the forward pass (the loss) and no update."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


class ForwardOnly(SPECS.LinNumpy):  # type: ignore[misc,name-defined]
    def cheat(self) -> Any:
        r = self.x @ self.w - self.y
        return 0.5 * (r * r).mean()


def build(case: Any) -> Any:
    return ForwardOnly(case)
