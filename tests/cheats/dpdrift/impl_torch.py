"""Data-parallel torch whose rank 1, once the checked steps are over, nudges its own replica of
w1 in place on every forward (outside autograd, so DDP's all-reduce never sees it): the
replicas drift apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
HONEST = SPECS.honest("mlp", "torch")
build = HONEST.build


def nudged(p: dict[str, Any], x: Any, y: Any) -> tuple[Any, Any, Any]:
    with torch.no_grad():
        p["w1"].mul_(1.001)
    return p, x, y


def data_parallel_loss(case: Any) -> Any:
    return SPECS.rank_one_cheats(case, HONEST.loss, nudged)
