"""TF32 on for each step after the checked ones, and off again before returning: the policy
reads right whenever it is asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file

CHEATS = Path(__file__).parents[1]
SPECS = load_suite_file(CHEATS / "specs.py")
HONEST = load_suite_file(CHEATS / "honest" / "impl_torch.py")


def lowered(inner: Any, n: int) -> Any:
    torch.set_float32_matmul_precision("high")
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return inner.step()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")


def build(case: Any) -> Any:
    return SPECS.AfterChecks(HONEST.build(case), lowered)
