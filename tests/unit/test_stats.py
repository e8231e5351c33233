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
    """What the table promises: a repeat run's figure falls in this run's interval 99% of
    the time (stats.PREDICTION). Checked over 400 simulated pairs of runs with 10%
    between-process spread: at least 97% hold. A bootstrap over three processes (the old
    interval) held far less."""
    rng = np.random.default_rng(7)
    held = 0
    for _ in range(400):
        one, two = stats.estimate(run_of(processes, rng)), stats.estimate(run_of(processes, rng))
        held += one.low <= two.value <= one.high
    assert held >= (stats.PREDICTION - 0.02) * 400


def test_the_ratio_interval_holds_the_next_runs_ratio() -> None:
    rng = np.random.default_rng(11)
    held = 0
    for _ in range(400):
        a, b = (stats.paired_ratio(run_of(5, rng), run_of(5, rng)) for _ in range(2))
        held += a.next_low <= b.value <= a.next_high
    assert held >= (stats.PREDICTION - 0.02) * 400


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


# -- the run's prior on spread (the normalised table's intervals) ----------------------------

def ratio_run(sds: list[float], rng: np.random.Generator, pairs: int = 3) -> list[np.ndarray]:
    """One run's paired logs: per figure, ``pairs`` process pairs around 0 with its own sd."""
    return [sd * rng.standard_normal(pairs) for sd in sds]


def spreads(run: list[np.ndarray]) -> list[tuple[float, int]]:
    return [(float(np.var(x, ddof=1)), len(x) - 1) for x in run]


def next_interval(logs: np.ndarray, prior: stats.Prior | None) -> tuple[float, float]:
    base = [[1.0]] * len(logs)
    cur = [[float(np.exp(x))] for x in logs]
    r = stats.paired_ratio(base, cur, prior=prior)
    return float(np.log(r.next_low)), float(np.log(r.next_high))


def test_the_prior_finds_the_spread_every_figure_shares() -> None:
    """Sixty figures of three pairs, all with the same 5% spread between processes: the prior
    recovers that spread, and it is worth far more than any figure's own two df."""
    prior = stats.Prior.fit(spreads(ratio_run([0.05] * 60, np.random.default_rng(3))))
    assert prior is not None
    assert 0.04 < np.sqrt(prior.s2) < 0.06
    assert prior.df > 20


def test_figures_whose_spreads_truly_differ_get_a_prior_of_few_df() -> None:
    """Spreads from 1% to 30%: a figure's own variance must keep most of its say."""
    rng = np.random.default_rng(4)
    prior = stats.Prior.fit(spreads(ratio_run(list(np.exp(rng.uniform(np.log(0.01), np.log(0.3),
                                                                       60))), rng)))
    assert prior is not None and prior.df < 10


def test_too_few_figures_or_no_spread_fit_no_prior() -> None:
    rng = np.random.default_rng(5)
    assert stats.Prior.fit(spreads(ratio_run([0.05] * (stats.PRIOR_MIN - 1), rng))) is None
    # processes that agree exactly (or a single process) say nothing about spread
    assert stats.Prior.fit([(0.0, 2)] * 10 + [(0.01, 0)] * 10) is None


def test_spreads_no_more_different_than_chance_give_a_prior_of_infinite_df() -> None:
    """Sample variances that differ less than chance alone would make them: every figure
    has the prior's spread, whatever its own processes showed. (The log of a sample variance
    of two df is low by digamma(1) on average, so the prior's variance is the sample
    variances' times exp(0.577).)"""
    prior = stats.Prior.fit([(0.0025, 2)] * 10)
    assert prior is not None and prior.df == float("inf")
    assert prior.s2 == pytest.approx(0.0025 * np.exp(np.euler_gamma))
    assert prior.moderate(1e-8, 2) == (prior.s2, float("inf"))


def test_without_a_prior_the_paired_ratio_is_the_plain_paired_test() -> None:
    """The gates call paired_ratio without a prior: their calibration is of the plain test."""
    rng = np.random.default_rng(6)
    base, cur = run_of(5, rng), run_of(5, rng)
    assert stats.paired_ratio(base, cur) == stats.paired_ratio(base, cur, prior=None)
    logs = stats.paired_logs(base, cur)
    plain = stats.paired_ratio(base, cur)
    t = float(np.mean(logs) / (np.std(logs, ddof=1) / np.sqrt(5)))
    assert plain.p_slower == pytest.approx(float(stats.scipy_stats.t.sf(t, 4)))


def test_a_figure_whose_processes_agreed_by_chance_gets_the_runs_spread() -> None:
    """What the prior is for. Runs of 40 ratios, three process pairs each, spreads from 2% to
    20%; a second run of each. Among the figures whose three pairs happened to agree most (the
    quarter with the smallest sample spread), the plain interval misses the next run's
    figure more than twice as often as its level allows (99%: one in a hundred); moderated by
    the run's prior it misses at most half as often again as allowed, and the intervals are
    no wider at the median."""
    rng = np.random.default_rng(8)
    held = {"plain": 0, "prior": 0}
    widths: dict[str, list[float]] = {"plain": [], "prior": []}
    lucky = 0
    for _ in range(60):
        sds = list(np.exp(rng.uniform(np.log(0.02), np.log(0.2), 40)))
        one, two = ratio_run(sds, rng), ratio_run(sds, rng)
        prior = stats.Prior.fit(spreads(one))
        assert prior is not None
        cut = np.quantile([np.var(x, ddof=1) for x in one], 0.25)
        for mine, theirs in zip(one, two, strict=True):
            for name, p in (("plain", None), ("prior", prior)):
                low, high = next_interval(mine, p)
                widths[name].append(high - low)
                if np.var(mine, ddof=1) <= cut:
                    held[name] += low <= float(np.median(theirs)) <= high
            lucky += np.var(mine, ddof=1) <= cut
    allowed = (1 - stats.PREDICTION) * lucky
    assert lucky - held["prior"] <= 1.5 * allowed
    assert lucky - held["plain"] > 2 * allowed
    assert np.median(widths["prior"]) <= np.median(widths["plain"])


def test_a_process_of_400000_rounds_is_bootstrapped_in_a_blink() -> None:
    """Resampling rounds would hold resamples x rounds draws (6 GB here); a long process's
    medians come from order statistics instead (stats._boot_median)."""
    import time

    rng = np.random.default_rng(3)
    start = time.monotonic()
    found = stats.estimate([rng.lognormal(0, 0.1, 400_000) for _ in range(3)])
    assert time.monotonic() - start < 5.0
    assert found.low < found.value < found.high and found.rounds == 1_200_000


@pytest.mark.parametrize("n", [2049, 2050])
def test_order_statistic_medians_match_resampled_medians(n: int) -> None:
    rng = np.random.default_rng(n)
    s = rng.lognormal(0, 0.2, n)
    direct = np.median(s[rng.integers(0, n, size=(3000, n))], axis=1)
    fast = stats._boot_median(s, rng, 3000)
    assert abs(fast.mean() / direct.mean() - 1) < 1e-3
    assert abs(fast.std() / direct.std() - 1) < 0.1
