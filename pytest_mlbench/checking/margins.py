"""How near each thresholded check's statistic came to its threshold, read from a record.

Every check that compares a statistic against a threshold (the clocks, the work after a
round's clock, the precision the arithmetic ran in, GFLOP/s against the measured peak) is
calibrated on honest code: its honest range is stated in docs/MEASURING.md ("Thresholds,
calibrated on honest code") and replayed by tests/unit/checking/test_honest_extremes.py.
A margin is the statistic over what its check allows, oriented so that the check fails
above 1.0; it reuses the checks' own allowances (audit.clock_floor, after_allowed;
arithmetic's EXACT, COARSE, PRECISE), never a copy of their formulas.
``tools/honest_ranges.py`` prints the largest margin of each check over saved runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from pytest_mlbench.checking import arithmetic, audit

Margin = tuple[str, float]  # (check, statistic over what it allows: fails above 1.0)


def of_clock(clock: audit.Clock) -> Iterator[Margin]:
    """One pass's clock: the worker's clock against the parent's, and the CPU after a round's
    clock (where each is judged)."""
    if clock.not_judged or not clock.turns:
        return
    floor, worker = audit.clock_floor(clock), clock.worker_s
    yield "clocks agree", floor / worker if worker > 0 else math.inf
    if audit.judged_after(clock):
        yield "after the clock", clock.after_s / audit.after_allowed(clock)


def of_arithmetic(what: str, entry: Mapping[str, Any], dtype: str) -> Iterator[Margin]:
    """One judged result's precision statistics (phases.check_arithmetic's record)."""
    if not entry.get("judged") or dtype not in arithmetic.COARSE or entry.get("error") is None:
        return
    if dtype == "float32" and "too exact not judged" not in entry.get("why", ""):
        yield "too exact", float(entry["exact"]) / arithmetic.EXACT
    if "where training took" not in what:  # not judged there (phases.check_trained)
        yield "too coarse", float(entry["error"]) / arithmetic.COARSE[dtype]
    precise = entry.get("precise") or {}
    if precise.get("judged"):
        yield "too precise", arithmetic.PRECISE / float(precise["ratio"])


def of_record(record: Mapping[str, Any], plausible: float) -> Iterator[Margin]:
    """Every margin a case's record keeps (``extra_info["mlbench"]``), over its passes;
    ``plausible``: the margin GFLOP/s may exceed the peak by (outcome.PLAUSIBLE_MARGIN)."""
    checks, measure = record.get("checks") or {}, record.get("measure") or {}
    for clock in checks.get("clocks") or []:
        yield from of_clock(audit.Clock.from_record(clock))
    dtype = (record.get("identity") or {}).get("dtype", "")
    for what, entry in (checks.get("arithmetic") or {}).items():
        yield from of_arithmetic(what, entry, dtype)
    gflops, peak = measure.get("gflops"), measure.get("peak_gflops")
    if gflops and peak:
        yield "GFLOP/s under the peak", float(gflops) / (float(peak) * (1 + plausible))
