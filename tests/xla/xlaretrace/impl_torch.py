"""The honest trainer whose batch is repeated twice after the checked steps (the same mean, a
new shape): its step traces another graph, compiled while timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file

ROOT = Path(__file__).parents[1]
SPECS = load_suite_file(ROOT / "specs.py")
HONEST = load_suite_file(ROOT / "xla_honest.py")


def build(case: Any) -> Any:
    return SPECS.AfterChecks(HONEST.build(case), SPECS.doubled_batch(case, torch.cat))
