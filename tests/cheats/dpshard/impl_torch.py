"""Data-parallel torch whose rank 1, once the checked steps are over, computes its loss on the
first half of its shard only (DDP still averages: the ranks agree, on the wrong gradient)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "dphonest" / "impl_torch.py")
CHECKED_FORWARDS = 4  # the gradient check, then the checked steps


def build(case: Any) -> Any:
    return HONEST.build(case)


def data_parallel_loss(case: Any) -> Any:
    calls = [0]

    def loss(p: dict[str, Any], x: Any, y: Any) -> Any:
        calls[0] += 1
        if case.rank == 1 and calls[0] > CHECKED_FORWARDS:
            half = x.shape[0] // 2
            x, y = x[:half], y[:half]
        return HONEST.loss_fn(p, x, y)

    return loss
