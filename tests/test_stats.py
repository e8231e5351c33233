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
