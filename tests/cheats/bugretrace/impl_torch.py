"""The honest step, whose batch is repeated twice after the checked steps (the same mean, a
new shape)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file

CHEATS = Path(__file__).parents[1]
SPECS = load_suite_file(CHEATS / "specs.py")


def build(case: Any) -> Any:
    honest = load_suite_file(CHEATS / "honest" / "impl_torch.py").build(case)
    return SPECS.AfterChecks(honest, SPECS.doubled_batch(case, torch.cat))
