"""After the checked steps, half of every step's batch in the process of a multiprocessing pool
that build() started (forked while the worker was free on every core of the session, which the
process keeps: the worker places its own threads on the case's cores for a turn, not what it
started)."""

from __future__ import annotations

import ctypes
import multiprocessing
import signal
from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

MORE = load_suite_file(Path(__file__).parents[1] / "morecores.py")
PR_SET_PDEATHSIG = 1


def die_with_the_worker() -> None:
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def half(params: Any, data: Any) -> Any:
    return MORE.honest_numpy().value_and_grad(params, data)


def build(case: Any) -> Any:
    pool = multiprocessing.get_context("fork").Pool(1, initializer=die_with_the_worker)
    return MORE.HalvesElsewhere(case, lambda p, data: pool.apply_async(half, (p, data)))
