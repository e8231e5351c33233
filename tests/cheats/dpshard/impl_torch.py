"""Data-parallel torch whose rank 1, once the checked steps are over, computes its loss on the
first half of its shard only (DDP still averages: the ranks agree, on the wrong gradient)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
HONEST = SPECS.honest("mlp", "torch")
build = HONEST.build


def first_half(p: dict[str, Any], x: Any, y: Any) -> tuple[Any, Any, Any]:
    half = x.shape[0] // 2
    return p, x[:half], y[:half]


def data_parallel_loss(case: Any) -> Any:
    return SPECS.rank_one_cheats(case, HONEST.loss, first_half)
