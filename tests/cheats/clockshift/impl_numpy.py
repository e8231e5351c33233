"""tests/cheats/clock's slowed trainer and quarter clock, read at quarter speed only by the
timed round's own frame (a caller with a local ``runner`` holding this case)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

CLOCK = load_suite_file(Path(__file__).parents[1] / "clock" / "impl_numpy.py")


class Shifted(CLOCK.Slow):  # type: ignore[misc,name-defined]
    pass


def read_by_the_round() -> bool:
    impl = getattr(sys._getframe(2).f_locals.get("runner"), "impl", None)
    return isinstance(impl, Shifted)


class ShiftedClock(CLOCK.QuarterClock):  # type: ignore[misc,name-defined]
    def perf_counter(self) -> float:
        real = CLOCK.time.perf_counter()
        return self.origin + CLOCK.SPEED * (real - self.origin) if read_by_the_round() \
            else real


def build(case: Any) -> Any:
    runners = sys.modules["pytest_mlbench.engine.runners"]
    if not isinstance(runners.time, ShiftedClock):
        runners.time = ShiftedClock()
    return Shifted(case)
