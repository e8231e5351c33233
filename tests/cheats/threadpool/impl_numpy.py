"""After the checked steps, half of every step's batch in a concurrent.futures thread (NumPy's
matmuls let go of the GIL, so the two halves run at once), which lets itself onto every core of
the host through libc (the worker placed every thread on the session's one core as the turn
began) and stays there."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

MORE = load_suite_file(Path(__file__).parents[1] / "morecores.py")


def half_on_every_core(params: Any, half: Any) -> Any:
    MORE.set_affinity_through_libc(MORE.every_core())
    return MORE.honest_numpy().value_and_grad(params, half)


def build(case: Any) -> Any:
    pool = ThreadPoolExecutor(1)
    return MORE.HalvesElsewhere(case, lambda p, half: pool.submit(half_on_every_core, p, half))
