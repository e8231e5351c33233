"""Process-level statistics: a figure and the interval the next run will actually show.

Variance on a shared machine lives between processes (thread placement, memory layout, the
host's neighbours), not between the rounds of one process. So every estimate here is built
from per-process samples: the figure is the median of the per-process medians (a ratio, the
median of the process pairs' ratios, each from the two sides' rounds of the same cycles),
and its interval is a Student-t *prediction* interval for the figure a repeat run with as
many processes will report. A hierarchical bootstrap over rounds is kept as the floor of that
interval, and as the only interval a single process can have (marked as such).

Three processes are two degrees of freedom, so the intervals and tests here take what the
run's other figures say about spread (spread.py): an absolute figure's interval and a paired
ratio's test and interval the run's ``Prior`` (limma's moderated t), a stored-baseline
comparison its comparison group's shared spread and the variance between the two runs.

The gates' tests are t-tests on the logarithms of per-process figures: paired (A/B in one
job: process i of the base ran beside process i of the head) or Welch's (a run against a
stored baseline). Processes that disagree by more than ``UNSTABLE`` are flagged,
pyperf-style, and their modes (clusters of process medians) are reported rather than
averaged away.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import special  # Student's t as scipy.stats.t computes it, without its import

from pytest_mlbench.spread import NO_BETWEEN, Between, Parts, Prior, satterthwaite
from pytest_mlbench.spread import PRIOR_MIN as PRIOR_MIN  # stats' own name before spread.py

UNSTABLE = 0.10  # process medians further apart than this (max/min - 1) flag a figure unstable
CONFIDENCE = 0.95  # confidence intervals of a change (the gates' tables)
# prediction intervals for the figure the next run will report (the normalised table, the
# record's interval): a table of many figures compared with another run's would show one in
# twenty outside its 95% interval by chance alone; at 99% (asv's level) one in a hundred
PREDICTION = 0.99
RESAMPLES = 2000
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)  # sd of a normal sample's median over its mean's

Samples = Sequence[Sequence[float]]  # per process, the values of its rounds
Cycles = Sequence[Sequence[int]]  # per process, the interleaving cycle each round ran in


@dataclass(frozen=True)
class Estimate:
    """A figure with its interval, and what stands behind it."""

    value: float
    low: float
    high: float
    processes: int
    rounds: int
    spread: float  # max/min of the process medians, minus 1
    modes: tuple[float, ...]  # medians of clusters of process medians; one entry when stable

    @property
    def unstable(self) -> bool:
        return self.spread > UNSTABLE

    def scaled(self, factor: float) -> Estimate:
        return Estimate(self.value * factor, self.low * factor, self.high * factor,
                        self.processes, self.rounds, self.spread,
                        tuple(m * factor for m in self.modes))

    def to_dict(self) -> dict[str, object]:
        return {"value": self.value, "low": self.low, "high": self.high,
                "processes": self.processes, "rounds": self.rounds, "spread": self.spread,
                "modes": list(self.modes), "unstable": self.unstable}


def _clean(samples: Samples) -> list[np.ndarray]:
    out = [np.asarray(s, dtype=np.float64) for s in samples if len(s)]
    if not out:
        raise ValueError("no samples: at least one process with one round is needed")
    return out


def process_medians(samples: Samples) -> list[float]:
    """Each process's median, in the order the processes ran."""
    return [float(np.median(s)) for s in _clean(samples)]


def center(samples: Samples) -> float:
    """Median of the per-process medians."""
    return float(statistics.median(process_medians(samples)))


def modes(medians: Sequence[float], gap: float = UNSTABLE) -> tuple[float, ...]:
    """Clusters of process medians split where consecutive sorted medians differ by more
    than ``gap`` (relative); the median of each cluster."""
    ordered = sorted(medians)
    clusters: list[list[float]] = [[ordered[0]]]
    for value in ordered[1:]:
        if value > clusters[-1][-1] * (1 + gap):
            clusters.append([])
        clusters[-1].append(value)
    return tuple(float(statistics.median(c)) for c in clusters)


# above this many rounds a process's bootstrap medians come from order statistics (_boot_median)
# rather than from resampled rounds: resamples x rounds draws would be 6 GB and minutes for a
# process of 400,000 rounds
DIRECT_ROUNDS = 2048


def _row_medians(table: np.ndarray) -> np.ndarray:
    """``np.median(table, axis=1)``, the same values: each row sorted and its middle read,
    which on a bootstrap's short rows (resamples x rounds, resamples x processes) is 2-4x
    faster than np.median's partition; a table holding NaN goes to np.median, for its NaN."""
    if not np.isfinite(table).all():
        return np.median(table, axis=1)
    ordered, mid = np.sort(table, axis=1), table.shape[1] // 2
    return ordered[:, mid] if table.shape[1] % 2 else (ordered[:, mid - 1] + ordered[:, mid]) / 2


def _boot_median(s: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """``resamples`` medians of ``s`` resampled with replacement. A long process draws them
    through order statistics, in O(n log n + resamples) and without the resamples x n table:
    the median of n draws from the empirical distribution is its inverse CDF at the median of
    n uniforms (Beta((n+1)/2, (n+1)/2) for odd n; for even n the two middle uniforms, the
    upper one the lower plus the least of the n/2 above it); the same distribution as
    resampling the rounds."""
    n = len(s)
    if n <= DIRECT_ROUNDS:
        return _row_medians(s[rng.integers(0, n, size=(resamples, n))])
    ordered = np.sort(s)

    def at(u: np.ndarray) -> np.ndarray:
        return ordered[np.minimum((u * n).astype(np.int64), n - 1)]

    k = (n + 1) // 2
    low = rng.beta(k, n - k + 1, size=resamples)
    if n % 2:
        return at(low)
    high = low + (1 - low) * rng.beta(1, n - k, size=resamples)
    return (at(low) + at(high)) / 2


def _boot_centers(samples: list[np.ndarray], rng: np.random.Generator,
                  resamples: int) -> np.ndarray:
    """Bootstrap distribution of ``center``: processes resampled, then rounds within each.

    Vectorised: each process's round-resampled medians are drawn once (``resamples`` of
    them), and every pick of a process in a resample takes one of those at random, which
    draws from the same distribution as resampling its rounds afresh (a Python loop over
    resamples cost ~0.2 s per figure, seconds per gate)."""
    n = len(samples)
    inner = np.stack([_boot_median(s, rng, resamples) for s in samples])  # (process, resample)
    picks = rng.integers(0, n, size=(resamples, n))
    draws = rng.integers(0, resamples, size=(resamples, n))
    return _row_medians(inner[picks, draws])


def t_quantile(confidence: float, df: float) -> float:
    """Two-sided Student-t quantile: the half-width of a ``confidence`` interval in units
    of the standard error, with ``df`` degrees of freedom."""
    return float(special.stdtrit(df, 1 - (1 - confidence) / 2))  # t.ppf


def predicted(center_log: float, logs: np.ndarray, confidence: float,
              efficiency: float = 1.0, prior: Prior | None = None) -> tuple[float, float] | None:
    """Where a repeat run's figure (``len(logs)`` processes, same estimator) will fall: a
    Student-t prediction interval on the log scale, ``t * s * sqrt(2/n)``, times the
    estimator's efficiency (``MEDIAN_EFFICIENCY`` for a median); ``s^2`` and t's degrees of
    freedom moderated by the run's ``prior`` when there is one. None below two processes."""
    n = len(logs)
    if n < 2:
        return None
    var, df = _moderated(logs, prior)
    half = t_quantile(confidence, df) * math.sqrt(var * 2 / n) * efficiency
    return math.exp(center_log - half), math.exp(center_log + half)


def _moderated(logs: np.ndarray, prior: Prior | None) -> tuple[float, float]:
    """The logs' sample variance and its degrees of freedom, moderated by ``prior``."""
    var, df = float(np.var(logs, ddof=1)), float(len(logs) - 1)
    return (var, df) if prior is None else prior.moderate(var, df)


def estimate(samples: Samples, *, seed: int = 0, resamples: int = RESAMPLES,
             confidence: float = PREDICTION, prior: Prior | None = None) -> Estimate:
    """The figure (median of process medians), the interval a repeat run's figure will fall
    in (see ``predicted``, moderated by the run's ``prior``: ``Prior.of_figures``; never
    narrower than the rounds' bootstrap), spread and modes."""
    clean = _clean(samples)
    medians = [float(np.median(s)) for s in clean]  # process_medians, already cleaned
    value = float(statistics.median(medians))
    boot = _boot_centers(clean, np.random.default_rng(seed), resamples)
    tail = (1 - confidence) / 2
    low, high = (float(q) for q in np.quantile(boot, [tail, 1 - tail]))
    wide = predicted(math.log(value), np.log(medians), confidence, MEDIAN_EFFICIENCY, prior)
    if wide is not None:
        low, high = min(low, wide[0]), max(high, wide[1])
    return Estimate(value, min(low, value), max(high, value), len(clean),
                    sum(len(s) for s in clean), max(medians) / min(medians) - 1,
                    modes(medians))


@dataclass(frozen=True)
class Ratio:
    """``current / baseline``: the figure, a confidence interval for it (``low``, ``high``),
    the interval a repeat run's figure will fall in (``next_low``, ``next_high``), and
    one-sided p-values for "slower" and "faster". ``pairs`` is the number of process pairs
    (paired) or the smaller side's process count (independent) behind it."""

    value: float
    low: float
    high: float
    p_slower: float
    p_faster: float
    next_low: float = 0.0
    next_high: float = math.inf
    pairs: int = 0

    @property
    def change(self) -> float:
        return self.value - 1


def ratio(baseline: Samples, current: Samples, *, seed: int = 0, resamples: int = RESAMPLES,
          confidence: float = CONFIDENCE, prediction: float = PREDICTION,
          spreads: tuple[Parts | None, Parts | None] = (None, None),
          between: Between = NO_BETWEEN) -> Ratio:
    """Independent samples (two runs, each its own processes): Welch's t-test on the logs of
    the process medians, the ratio being that of their geometric means. A side's variance is
    its processes' own, or ``spreads`` (what its run's other figures say: ``group_spreads``),
    and the between-run variance (``between``: what two runs' figures differ by beyond their
    processes, ``between_runs``) is added to the difference's, with Welch-Satterthwaite's
    degrees of freedom over every part. Below two processes a side, a bootstrap over rounds
    (which cannot see between-process spread; the gate says how many processes stood behind a
    verdict)."""
    base, cur = _clean(baseline), _clean(current)
    if len(base) < 2 or len(cur) < 2:
        return _rounds_ratio(base, cur, center(current) / center(baseline), seed, resamples,
                             (confidence, prediction))
    diff, within, df_within = log_difference(baseline, current, spreads)
    var, df = satterthwaite(((within, df_within), between))
    return _t_ratio(diff, math.sqrt(var), max(df, 1.0), (confidence, prediction),
                    min(len(base), len(cur)))


def log_difference(baseline: Samples, current: Samples,
                   spreads: tuple[Parts | None, Parts | None] = (None, None),
                   ) -> tuple[float, float, float]:
    """Two runs' figures (two processes a side at least) as the difference of the means of
    their log process medians, its variance (each side's the variance of one process, its own
    or ``spreads``, over its processes) and Welch-Satterthwaite's degrees of freedom."""
    lb, lc = (np.log(process_medians(s)) for s in (baseline, current))
    parts = [(v / len(x), df) for x, spread in zip((lb, lc), spreads, strict=True)
             for v, df in (spread or ((float(np.var(x, ddof=1)), len(x) - 1.0),))]
    var, df = satterthwaite(parts)
    return float(lc.mean() - lb.mean()), var, df


def paired_ratio(baseline: Samples, current: Samples, *, cycles: tuple[Cycles, Cycles] = ((), ()),
                 seed: int = 0, resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                 prediction: float = PREDICTION, prior: Prior | None = None) -> Ratio:
    """Paired samples (A/B interleaved in one job, or two cases of one session): process i
    of the baseline ran beside process i of the current, so each pair contributes one log
    ratio (``paired_logs``: by cycle where ``cycles`` says when each round ran) and slow
    periods of the host cancel in the pair. A paired t-test on those logs; one pair alone
    judges nothing (p-values of 1). With a ``prior`` (fitted over the paired logs of the
    run's other ratios: the normalised table's, the A/B gate's), the logs' variance is
    moderated by it (``Prior.moderate``)."""
    base, cur = _clean(baseline), _clean(current)
    logs = paired_logs(baseline, current, cycles)
    if len(logs) < 2:
        found = _rounds_ratio(base, cur, float(np.exp(logs[0])), seed, resamples,
                              (confidence, prediction))
        return replace(found, p_slower=1.0, p_faster=1.0)
    var, df = _moderated(logs, prior)
    se = math.sqrt(var / len(logs))
    # the figure is the median pair (one odd process, in a slow stretch of the host, does
    # not move it); the test is on the mean
    return _t_ratio(float(logs.mean()), se, df, (confidence, prediction), len(logs),
                    center=float(np.median(logs)), efficiency=MEDIAN_EFFICIENCY)


def paired_logs(baseline: Samples, current: Samples,
                cycles: tuple[Cycles, Cycles] = ((), ())) -> np.ndarray:
    """Per process pair, the log of the current's time over the baseline's: matched by cycle
    (``cycle_log``) where both processes' rounds say in which interleaving cycle they ran
    (``cycles``: each side's ``Measure.cycles``), else the ratio of the two processes'
    medians (records without cycles, or processes that shared no cycle)."""
    base, cur = _labelled(baseline, cycles[0]), _labelled(current, cycles[1])
    if len(base) != len(cur):
        raise ValueError(f"paired samples need as many baseline processes as current ones "
                         f"({len(base)} != {len(cur)})")
    return np.array([_pair_log(b, c) for b, c in zip(base, cur, strict=True)])


Labelled = tuple[np.ndarray, np.ndarray | None]  # a process's rounds and each round's cycle


def _labelled(samples: Samples, cycles: Cycles) -> list[Labelled]:
    """``_clean``'s processes, each with its rounds' cycles (None where not recorded or not
    one label a round)."""
    out = []
    for i, s in enumerate(samples):
        if not len(s):
            continue
        labels = np.asarray(cycles[i]) if i < len(cycles) else None
        out.append((np.asarray(s, dtype=np.float64),
                    labels if labels is not None and len(labels) == len(s) else None))
    if not out:
        raise ValueError("no samples: at least one process with one round is needed")
    return out


def _pair_log(base: Labelled, cur: Labelled) -> float:
    (b, b_cycles), (c, c_cycles) = base, cur
    if b_cycles is not None and c_cycles is not None:
        shared = np.intersect1d(b_cycles, c_cycles)
        if len(shared):
            return cycle_log(np.log([np.median(c[c_cycles == k]) / np.median(b[b_cycles == k])
                                     for k in shared]))
    return float(np.log(np.median(c) / np.median(b)))


def cycle_log(logs: np.ndarray) -> float:
    """A process pair's log ratio from its cycles' (each the log of the ratio of the two
    sides' median rounds in one cycle): their Hodges-Lehmann estimate, the median of the
    pairwise means. The two sides' turns of one cycle ran back to back (A/B) or within one
    cycle of the group's turns (two cases of a session), so what the host did in that cycle
    falls on both; a ratio of whole-process medians lets a slow cycle that caught a side's
    median rounds through. Hodges-Lehmann rather than the plain median or mean: on the
    committed baseline's rounds (two cases of one group, 301 pairs), the sd of a pair's log
    ratio was 7.3% from process medians, 6.5% as the median over cycles, 6.0% Hodges-Lehmann,
    5.9% the mean; and one cycle of six gone wrong moves it by less than the mean's sixth."""
    i, j = np.triu_indices(len(logs))
    return float(np.median((logs[i] + logs[j]) / 2))


def _t_ratio(diff: float, se: float, df: float, levels: tuple[float, float], pairs: int,
             center: float | None = None, efficiency: float = 1.0) -> Ratio:
    """A Ratio from a difference of logs and its standard error, Student-t with ``df``:
    the p-values test ``diff``; the figure is ``center`` (default ``diff``), its intervals
    ``efficiency`` times as wide as the mean's (a median's are wider): a confidence interval
    and a prediction interval for the next run, at ``levels`` (confidence, prediction)."""
    if se > 0:
        p_slower = float(special.stdtr(df, -diff / se))  # t.sf
        p_faster = float(special.stdtr(df, diff / se))  # t.cdf
    else:  # every process agreed exactly: the sign alone decides
        p_slower, p_faster = (0.0 if diff > 0 else 1.0), (0.0 if diff < 0 else 1.0)
    mid = diff if center is None else center
    half = t_quantile(levels[0], df) * se * efficiency
    # a repeat run has its own error as large again
    nxt = t_quantile(levels[1], df) * se * efficiency * math.sqrt(2)
    return Ratio(math.exp(mid), math.exp(mid - half), math.exp(mid + half),
                 p_slower, p_faster, math.exp(mid - nxt), math.exp(mid + nxt), pairs)


def _rounds_ratio(base: list[np.ndarray], cur: list[np.ndarray], value: float, seed: int,
                  resamples: int, levels: tuple[float, float]) -> Ratio:
    """Below two processes a side: a bootstrap over rounds, blind to between-process spread
    (its quantiles at ``levels``: confidence, prediction)."""
    rng = np.random.default_rng(seed)
    boot = _boot_centers(cur, rng, resamples) / _boot_centers(base, rng, resamples)
    (low, high), (next_low, next_high) = (
        (min(float(np.quantile(boot, (1 - level) / 2)), value),
         max(float(np.quantile(boot, (1 + level) / 2)), value)) for level in levels)
    # one-sided p-values from the bootstrap distribution, never exactly 0
    floor = 1 / (len(boot) + 1)
    p_slower = max(float(np.mean(boot <= 1.0)), floor)
    p_faster = max(float(np.mean(boot >= 1.0)), floor)
    return Ratio(value, low, high, p_slower, p_faster, next_low, next_high,
                 min(len(base), len(cur)))
