"""Process-level statistics: intervals that see between-process spread, instability flags with
modes, and paired ratios that cancel what two sides share. Synthetic samples only: nothing here
depends on how fast anything runs."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_mlbench import stats


def process(median: float, rounds: int = 40, spread: float = 0.01, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median * np.exp(spread * rng.standard_normal(rounds)))


def test_interval_covers_the_spread_between_processes_not_only_within() -> None:
    """Three processes at 1.0, 1.3 and 1.6 ms, each tight within itself (1%): rounds alone
    would claim +-1%; the process-level interval must reach across the processes."""
    samples = [process(m, seed=i) for i, m in enumerate((1.0e-3, 1.3e-3, 1.6e-3))]
    est = stats.estimate(samples)
    assert est.low <= 1.05e-3 and est.high >= 1.5e-3
    pooled = np.concatenate(samples)
    naive = np.quantile([np.median(np.random.default_rng(i).choice(pooled, pooled.size))
                         for i in range(200)], [0.025, 0.975])
    assert (est.high - est.low) > 3 * (naive[1] - naive[0])


def test_disagreeing_processes_are_unstable_with_both_modes() -> None:
    samples = [process(m, seed=i) for i, m in enumerate((0.72e-3, 0.73e-3, 1.61e-3, 1.64e-3))]
    est = stats.estimate(samples)
    assert est.unstable and est.spread > 1.0
    assert len(est.modes) == 2
    assert est.modes[0] == pytest.approx(0.725e-3, rel=0.02)
    assert est.modes[1] == pytest.approx(1.625e-3, rel=0.02)


def test_agreeing_processes_are_stable_with_one_mode() -> None:
    est = stats.estimate([process(1e-3, seed=i) for i in range(3)])
    assert not est.unstable and len(est.modes) == 1
    assert est.processes == 3 and est.rounds == 120


def test_estimate_refuses_no_samples() -> None:
    with pytest.raises(ValueError, match="no samples"):
        stats.estimate([[], []])


def test_paired_ratio_cancels_a_shared_drift() -> None:
    """Each pair of processes ran at a different host speed (x1, x1.5, x2); the head is 20%
    slower than the base in every pair. Pairing sees +20% with a tight interval; resampling the
    two sides independently cannot tell."""
    drift = (1.0, 1.5, 2.0)
    base = [process(1e-3 * d, seed=i) for i, d in enumerate(drift)]
    head = [process(1.2e-3 * d, seed=10 + i) for i, d in enumerate(drift)]
    paired = stats.paired_ratio(base, head)
    assert paired.value == pytest.approx(1.2, rel=0.02)
    assert paired.low > 1.15 and paired.p_slower < 0.01
    loose = stats.ratio(base, head)
    assert loose.low < 1.0 < loose.high


def test_paired_ratio_of_unchanged_code_is_not_significant_either_way() -> None:
    drift = (1.0, 1.4, 0.9)
    base = [process(1e-3 * d, seed=i) for i, d in enumerate(drift)]
    head = [process(1e-3 * d, seed=20 + i) for i, d in enumerate(drift)]
    found = stats.paired_ratio(base, head)
    assert abs(found.change) < 0.02


def test_paired_ratio_needs_equal_process_counts() -> None:
    with pytest.raises(ValueError, match="as many baseline processes"):
        stats.paired_ratio([process(1e-3)], [process(1e-3), process(1e-3)])


def run_of(processes: int, rng: np.random.Generator, sd: float = 0.10) -> list[list[float]]:
    """One run: each process lands at its own level (log-normal, ``sd`` between processes)
    and is tight within itself (1%), as on a shared host."""
    return [process(1e-3 * float(np.exp(sd * rng.standard_normal())), rounds=20,
                    seed=int(rng.integers(1 << 30))) for _ in range(processes)]


@pytest.mark.parametrize("processes", [3, 5])
def test_the_interval_holds_the_next_runs_figure(processes: int) -> None:
    """What the table promises: a repeat run's figure falls in this run's interval 95% of
    the time. Checked over 400 simulated pairs of runs with 10% between-process spread:
    at least 90% hold. A bootstrap over three processes (the old interval) held far less."""
    rng = np.random.default_rng(7)
    held = 0
    for _ in range(400):
        one, two = stats.estimate(run_of(processes, rng)), stats.estimate(run_of(processes, rng))
        held += one.low <= two.value <= one.high
    assert held >= 0.90 * 400


def test_the_ratio_interval_holds_the_next_runs_ratio() -> None:
    rng = np.random.default_rng(11)
    held = 0
    for _ in range(400):
        a, b = (stats.paired_ratio(run_of(5, rng), run_of(5, rng)) for _ in range(2))
        held += a.next_low <= b.value <= a.next_high
    assert held >= 0.90 * 400


def test_two_pairs_cannot_reach_one_percent_and_five_consistent_pairs_do() -> None:
    """A paired t-test on the logs: +20% in two pairs is not enough evidence at alpha 0.01
    (one degree of freedom); +20% in five pairs with 5% scatter is."""
    rng = np.random.default_rng(3)
    levels = [float(np.exp(0.05 * rng.standard_normal())) for _ in range(5)]
    base = [process(1e-3 * v, seed=i) for i, v in enumerate(levels)]
    head = [process(1.2e-3 * v * float(np.exp(0.05 * rng.standard_normal())), seed=9 + i)
            for i, v in enumerate(levels)]
    assert stats.paired_ratio(base[:2], head[:2]).p_slower > 0.01
    five = stats.paired_ratio(base, head)
    assert five.p_slower < 0.01 and five.low > 1.0 and five.pairs == 5


def test_one_wild_pair_among_unchanged_ones_is_not_a_slowdown() -> None:
    """A neighbour stole a core during one of five pairs (+50% there, nothing elsewhere):
    the paired test sees the scatter and does not call it significant."""
    base = [process(1e-3, seed=i) for i in range(5)]
    head = [process(1e-3 * f, seed=20 + i) for i, f in enumerate((1.5, 1.0, 1.0, 1.01, 0.99))]
    found = stats.paired_ratio(base, head)
    assert found.p_slower > 0.01


def test_welch_ratio_between_runs_sees_process_spread() -> None:
    rng = np.random.default_rng(5)
    base, same = run_of(5, rng), run_of(5, rng)
    slower = [[t * 1.5 for t in p] for p in run_of(5, rng)]
    assert stats.ratio(base, same).p_slower > 0.01
    found = stats.ratio(base, slower)
    assert found.p_slower < 0.01 and found.low < 1.5 < found.high
