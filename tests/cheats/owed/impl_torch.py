"""The honest torch trainer (tests/cheats/honest) wrapped by specs.OwedSteps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
HONEST = load_suite_file(Path(__file__).parents[1] / "honest" / "impl_torch.py")


def build(case: Any) -> Any:
    return SPECS.OwedSteps(HONEST.build(case))
