"""The honest NumPy trainer, slowed to 100 ms a step (so that a round is long enough to show
on any clock), which replaces the clock the worker's runner reads (the ``time`` attribute of
pytest_mlbench.engine.runners) with one running at a quarter speed whenever it times this
case (other cases served by the same worker keep the real clock)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
STEP_S = 0.1
SPEED = 0.25


class Slow(SPECS.LinNumpy):  # type: ignore[misc,name-defined]
    def honest_step(self) -> Any:
        time.sleep(STEP_S)
        return super().honest_step()


def timing_me(depth: int = 4) -> bool:
    """Whether the clock is read for this case: a caller holds a runner of a Slow."""
    frame = sys._getframe(2)
    for _ in range(depth):
        if frame is None:
            return False
        for name in ("runner", "self"):
            found = frame.f_locals.get(name)
            impl = getattr(getattr(found, "runner", found), "impl", None)
            if isinstance(impl, Slow):
                return True
        frame = frame.f_back
    return False


class QuarterClock:
    """``time`` as the runner sees it, its perf_counter slowed for this case only."""

    def __init__(self) -> None:
        self.origin = time.perf_counter()

    def perf_counter(self) -> float:
        real = time.perf_counter()
        return self.origin + SPEED * (real - self.origin) if timing_me() else real

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def build(case: Any) -> Any:
    runners = sys.modules["pytest_mlbench.engine.runners"]
    if not isinstance(runners.time, QuarterClock):
        runners.time = QuarterClock()
    return Slow(case)
