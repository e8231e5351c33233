"""The step detector's false-alarm rate and power by simulation (reporting/steps.py).

    python tools/step_rates.py --trials 1000

Histories of 40 runs of per-process log medians, drawn as tests/unit/reporting/test_steps.py
draws them (five noise shapes, no step): the share in which a step is found at a per-case
level of 5% (the level tested: a stepless case is a false alarm that often). Then the share
of histories with a 5%, 10% and 15% step at run 25 in which that step is found where it is,
at the level a case gets in a page of 90 cases at --alpha 0.01 (0.01 / 90)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_mlbench.reporting import steps  # noqa: E402
from tests.unit.reporting.test_steps import SHAPES, history  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    args = parser.parse_args()
    n = args.trials
    print(f"false alarms at 5% a case, {n} stepless histories of 40 runs each:")
    for shape in SHAPES:
        rng = np.random.default_rng(11)
        found = sum(bool(steps.changes(history(rng, **shape), 0.05, seed=k)) for k in range(n))
        se = math.sqrt(0.05 * 0.95 / n)
        print(f"  {shape or 'plain'}: {found / n:.3f} (a calibrated test: 0.050 +- {2 * se:.3f})")
    level = 0.01 / 90
    print(f"steps found at run 25 of 40 at {level:.2g} a case (a 90-case page at --alpha 0.01):")
    for size in (0.05, 0.10, 0.15):
        for shape in ({}, {"host": 0.05}):
            rng = np.random.default_rng(12)
            hit = sum([at for at, _ in steps.changes(history(rng, step_at=24, size=size, **shape),
                                                      level, seed=k)] == [24] for k in range(n // 4))
            print(f"  {size:.0%} step, {shape or 'plain'}: {hit / (n // 4):.3f}")


if __name__ == "__main__":
    main()
