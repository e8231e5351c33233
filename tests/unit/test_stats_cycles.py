"""Paired ratios matched by cycle (stats.paired_logs): a process pair's log ratio from the two
sides' rounds of the same interleaving cycle (Measure.cycles), which ran back to back, and
the ratio of the two processes' medians where the rounds do not say when they ran. Made-up
rounds only: nothing here is timed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_mlbench import stats
from pytest_mlbench.reporting import normalised
from pytest_mlbench.storing.record import Measure

SIX = tuple(range(6))  # one round in each of a pass's six cycles
HOST = np.array([1.0, 1.0, 1.0, 2.0, 2.0, 2.0]) * 1e-3  # the host at half speed from cycle 3


def misread_pair(late: float, early: float) -> tuple[list[float], list[float]]:
    """Unchanged code, the host at half speed for the second half of the pass on both sides
    alike; the base's turn of cycle 2 ran ``late`` times slow (its own bad moment) and that of
    cycle 3 ``early`` times fast. The base's median falls between its cycles 2 and 3, the
    head's between the host's two speeds: the ratio of the medians reads about +11%; each
    cycle but those two reads 0%."""
    own = np.ones(6)
    own[2], own[3] = late, early
    return list(HOST * own), list(HOST)


def misread() -> tuple[list[list[float]], list[list[float]]]:
    pairs = [misread_pair(1.30, 0.70), misread_pair(1.25, 0.72), misread_pair(1.35, 0.68)]
    return [b for b, _ in pairs], [h for _, h in pairs]


def test_a_pair_matched_by_cycle_is_not_misread_by_the_hosts_slow_half() -> None:
    """Process medians call unchanged code 11% slower with p < 0.001 (all three pairs agree);
    matched by cycle it reads no change."""
    base, head = misread()
    by_medians = stats.paired_ratio(base, head)
    assert by_medians.value == pytest.approx(1.11, abs=0.01) and by_medians.p_slower < 0.001
    by_cycle = stats.paired_ratio(base, head, cycles=((SIX,) * 3, (SIX,) * 3))
    assert by_cycle.value == pytest.approx(1.0) and by_cycle.p_slower > 0.5
    assert np.allclose(stats.paired_logs(base, head, ((SIX,) * 3, (SIX,) * 3)), 0.0)


def test_a_real_change_is_read_through_the_hosts_moments() -> None:
    """The head 10% slower in every round, the host's speed moving from cycle to cycle (x1
    to x3) and each side's rounds by 2% of their own: matched by cycle the pairs read +10%
    within 2%."""
    rng = np.random.default_rng(7)
    base, head = [], []
    for _ in range(3):
        host = rng.uniform(1.0, 3.0, 6) * 1e-3
        base.append(list(host * np.exp(0.02 * rng.standard_normal(6))))
        head.append(list(1.1 * host * np.exp(0.02 * rng.standard_normal(6))))
    logs = stats.paired_logs(base, head, ((SIX,) * 3, (SIX,) * 3))
    assert np.allclose(logs, math.log(1.1), atol=0.02)


def test_a_cycle_gone_wrong_moves_the_pair_less_than_a_mean_would() -> None:
    """Hodges-Lehmann over the cycles: five cycles read +10%, one +200%; the pair reads +10%
    (a mean of the cycles' logs would read +30%)."""
    logs = np.log([1.1] * 5 + [3.0])
    assert stats.cycle_log(logs) == pytest.approx(math.log(1.1))
    assert math.exp(logs.mean()) > 1.25


# -- where the rounds do not say when they ran: the ratio of the processes' medians ----------

def test_records_without_cycles_pair_by_process_medians() -> None:
    """Records from before cycles were kept (Measure.cycles empty), or one side without them:
    the ratio of the two processes' medians, as before."""
    base, head = misread()
    medians = np.log([np.median(h) / np.median(b) for b, h in zip(base, head, strict=True)])
    assert np.array_equal(stats.paired_logs(base, head), medians)
    assert np.array_equal(stats.paired_logs(base, head, ((SIX,) * 3, ())), medians)


def test_a_process_whose_cycles_do_not_fit_its_rounds_pairs_by_medians() -> None:
    """A process pair whose labels are not one a round (or share no cycle) falls back alone;
    the others stay matched by cycle."""
    base, head = misread()
    short = ((SIX, SIX[:5], SIX), (SIX, SIX, (6, 7, 8, 9, 10, 11)))
    logs = stats.paired_logs(base, head, short)
    assert logs[0] == pytest.approx(0.0)
    assert logs[1] == pytest.approx(math.log(np.median(head[1]) / np.median(base[1])))
    assert logs[2] == pytest.approx(math.log(np.median(head[2]) / np.median(base[2])))


def test_only_the_cycles_both_sides_ran_are_matched() -> None:
    """The base ran cycles 0-5, the head 0-4 only: its cycle 5 is left out, and the round the
    base ran in it (ten times slow) moves nothing."""
    base = [[1e-3] * 5 + [1e-2]]
    head = [[1.2e-3] * 5]
    logs = stats.paired_logs(base, head, ((SIX,), (SIX[:5],)))
    assert logs[0] == pytest.approx(math.log(1.2))


def test_empty_processes_keep_their_cycles_in_step() -> None:
    """An empty process is dropped with its labels: the next process keeps its own."""
    base, head = misread()
    logs = stats.paired_logs([[], *base], [[], *head], (((), *(SIX,) * 3), ((), *(SIX,) * 3)))
    assert np.allclose(logs, 0.0)


# -- the normalised table: two cases of one session ------------------------------------------

def test_the_normalised_tables_ratios_are_matched_by_cycle() -> None:
    """A group's cases take their turns in every cycle of a pass, so the table's relative
    figures pair by cycle too; without cycles, as before."""
    base, head = misread()
    ref = Measure(1, tuple(tuple(p) for p in base), (SIX,) * 3)
    mine = Measure(1, tuple(tuple(p) for p in head), (SIX,) * 3)
    assert normalised.relatives([(mine, ref)])[0].value == pytest.approx(1.0)
    bare = [(Measure(1, mine.passes), Measure(1, ref.passes))]
    assert normalised.relatives(bare)[0].value == pytest.approx(1.11, abs=0.01)
