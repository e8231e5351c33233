"""After the checked steps, every thread of the worker allowed on every core of the host
(os.sched_setaffinity over /proc/self/task, widening the one core the session gave) and torch
at two threads for each step; both put back before the step returns."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file

MORE = load_suite_file(Path(__file__).parents[1] / "morecores.py")


def place(cores: set[int]) -> None:
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cores)
        except OSError:
            continue


def on_every_core(inner: Any, n: int) -> Any:
    given = os.sched_getaffinity(0)
    place(MORE.every_core())
    torch.set_num_threads(2)
    try:
        return inner.step()
    finally:
        torch.set_num_threads(1)
        place(given)


def build(case: Any) -> Any:
    return MORE.SPECS.AfterChecks(MORE.SPECS.honest("mlp", "torch").build(case), on_every_core)
