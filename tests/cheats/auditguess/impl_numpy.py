"""Guesses which rounds are audited from its call count: honest through the checked steps,
the two warm-up rounds and timed round 1 (all a --benchmark-disable session runs and
audits), then idle. Timed sessions audit rounds drawn at random, which it cannot foresee."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")

HONEST_CALLS = SPECS.CHECKED + 3 * 4  # checked steps, two warm-up rounds, round 1 (4 calls)


class Guessing(SPECS.LinNumpy):  # type: ignore[misc,name-defined]
    def cheat(self) -> Any:
        if self.calls <= HONEST_CALLS:
            return self.honest_step()
        return self.loss_and_grads()[0] * 0


def build(case: Any) -> Any:
    return Guessing(case)
