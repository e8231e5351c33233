"""Data-parallel torch whose rank 1, once the checked steps are over, nudges its own replica of
w1 in place on every forward (outside autograd, so DDP's all-reduce never sees it): the
replicas drift apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

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
            with torch.no_grad():
                p["w1"].mul_(1.001)
        return HONEST.loss_fn(p, x, y)

    return loss
