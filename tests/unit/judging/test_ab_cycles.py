"""The A/B gate pairs base and head by cycle (judging/ab.py through stats.paired_logs): the
two sides' turns of one cycle ran back to back, so a case's pair of processes reads the
ratio of their rounds cycle by cycle, and the session's prior is fitted on that same
quantity. Made-up rounds only: nothing here is timed."""

from __future__ import annotations

import numpy as np

from pytest_mlbench import stats
from pytest_mlbench.judging import ab
from pytest_mlbench.measuring.outcome import Outcome
from pytest_mlbench.storing.record import Measure, Record
from tests.synthetic import identity
from tests.unit.test_stats_cycles import SIX, misread

ALPHA, THRESHOLD = 0.01, 0.10


def side(c: int, passes: list[list[float]], cycles: bool) -> Outcome:
    measure = Measure(1, tuple(tuple(p) for p in passes), (SIX,) * len(passes) if cycles else ())
    return Outcome("passed", record=Record(identity(dims={"case": c}), f"c{c}", measure))


def case(c: int, cycles: bool = True, scale: float = 1.0) -> tuple[Outcome, Outcome]:
    base, head = misread()
    return side(c, base, cycles), side(c, [[t * scale for t in p] for p in head], cycles)


def test_unchanged_code_under_a_slow_half_of_the_host_passes_the_gate() -> None:
    """The host at half speed for the second half of every pass on both sides, the base's
    turns of two cycles off by their own: the gate passes it; paired by process medians (the
    gate before, and still for records without cycles) it failed it, +11% with p < 0.001."""
    by_cycle = ab.compare("c", *case(0), threshold=THRESHOLD, alpha=ALPHA)
    assert by_cycle.verdict == "no significant change" and not by_cycle.failed
    by_medians = ab.compare("c", *case(0, cycles=False), threshold=THRESHOLD, alpha=ALPHA)
    assert by_medians.failed and by_medians.ratio is not None
    assert by_medians.ratio.p_slower < 0.001


def test_a_slowdown_under_the_same_host_is_still_caught() -> None:
    """The same rounds with the head 20% slower in every round: SLOWER, read as +20%."""
    row = ab.compare("c", *case(0, scale=1.2), threshold=THRESHOLD, alpha=ALPHA)
    assert row.failed and row.ratio is not None
    assert abs(row.ratio.value - 1.2) < 0.01


def test_the_sessions_prior_is_fitted_on_the_logs_the_gate_tests() -> None:
    """session_prior takes each case's pairs matched by cycle, as compare does."""
    rng = np.random.default_rng(3)
    pairs = {}
    for c in range(8):
        base, head = misread()
        head = [[t * float(np.exp(0.03 * rng.standard_normal())) for t in p] for p in head]
        pairs[f"c{c}"] = (side(c, base, True), side(c, head, True))
    logs = [stats.paired_logs(b.record.measure.per_step(), h.record.measure.per_step(),
                              ((SIX,) * 3, (SIX,) * 3))
            for b, h in pairs.values() if b.record and h.record and b.record.measure
            and h.record.measure]
    assert ab.session_prior(pairs) == stats.Prior.of_logs(logs)
    medians = [stats.paired_logs(b.record.measure.per_step(), h.record.measure.per_step())
               for b, h in pairs.values() if b.record and h.record and b.record.measure
               and h.record.measure]
    assert ab.session_prior(pairs) != stats.Prior.of_logs(medians)
