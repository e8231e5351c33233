"""After the checked steps, torch at two threads (the session gave one), never set back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file

MORE = load_suite_file(Path(__file__).parents[1] / "morecores.py")


def two_threads(inner: Any, n: int) -> Any:
    if n == 1:
        torch.set_num_threads(2)
    return inner.step()


def build(case: Any) -> Any:
    return MORE.SPECS.AfterChecks(MORE.SPECS.honest("mlp", "torch").build(case), two_threads)
