"""Process-level statistics: a figure and the interval the next run will actually show.

Variance on a shared machine lives between processes (thread placement, memory layout, the
host's neighbours), not between the rounds of one process. So every estimate here is built
from per-process samples: the figure is the median of the per-process medians (a ratio, the
median of per-process paired ratios), and its interval is a Student-t *prediction* interval
for the figure a repeat run with as many processes will report: with few processes the t
quantile is large (4.3 at three processes, 2.8 at five), so three processes that happened to
agree do not pretend to be thirty. A hierarchical bootstrap over rounds is kept as the
floor of that interval, and as the only interval a single process can have (marked as such).

Three processes that happen to agree make a narrow interval even with the t quantile: the
sample variance of three logs is itself a wild guess. The normalised table therefore shares
what the run's other ratios say about spread (``Prior``: an empirical-Bayes prior on the
variance, the moderated t of limma, Smyth 2004): each ratio's variance is pulled towards the
run's typical one, with the prior's degrees of freedom added to its own: a figure whose
processes agreed by chance widens, one that was merely unlucky narrows. On the reference host
(three sets of three runs of the main job, docs/GATE.md) the intervals missed another run's
median 48 times in 1,362 with it and 52 without (a 95% interval may miss 5%); with three
processes a case they were narrower at the median (x1.24 and x1.28 from low to high, against
x1.36 and x1.46), with five about as wide (x1.20 against x1.21).

The gate's tests are t-tests on the logarithms of per-process figures: paired (A/B in one
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
from scipy import special
from scipy import stats as scipy_stats

UNSTABLE = 0.10  # process medians further apart than this (max/min - 1) flag a figure unstable
CONFIDENCE = 0.95  # confidence intervals of a change (the gates' tables)
# prediction intervals for the figure the next run will report (the normalised table, the
# record's interval): a table of many figures compared with another run's would show one in
# twenty outside its 95% interval by chance alone; at 99% (asv's level) one in a hundred
PREDICTION = 0.99
RESAMPLES = 2000
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)  # sd of a normal sample's median over its mean's

Samples = Sequence[Sequence[float]]  # per process, the values of its rounds


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


def _boot_median(s: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """``resamples`` medians of ``s`` resampled with replacement. A long process draws them
    through order statistics, in O(n log n + resamples) and without the resamples x n table:
    the median of n draws from the empirical distribution is its inverse CDF at the median of
    n uniforms (Beta((n+1)/2, (n+1)/2) for odd n; for even n the two middle uniforms, the
    upper one the lower plus the least of the n/2 above it); the same distribution as
    resampling the rounds."""
    n = len(s)
    if n <= DIRECT_ROUNDS:
        return np.median(s[rng.integers(0, n, size=(resamples, n))], axis=1)
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
    return np.median(inner[picks, draws], axis=1)


def t_quantile(confidence: float, df: float) -> float:
    """Two-sided Student-t quantile: the half-width of a ``confidence`` interval in units
    of the standard error, with ``df`` degrees of freedom."""
    return float(scipy_stats.t.ppf(1 - (1 - confidence) / 2, df))


def predicted(center_log: float, logs: np.ndarray, confidence: float,
              efficiency: float = 1.0) -> tuple[float, float] | None:
    """Where a repeat run's figure (``len(logs)`` processes, same estimator) will fall: a
    Student-t prediction interval on the log scale, ``t * s * sqrt(2/n)``, times the
    estimator's efficiency (``MEDIAN_EFFICIENCY`` for a median). None below two processes."""
    n = len(logs)
    if n < 2:
        return None
    half = t_quantile(confidence, n - 1) * float(np.std(logs, ddof=1)) * math.sqrt(2 / n)
    half *= efficiency
    return math.exp(center_log - half), math.exp(center_log + half)


PRIOR_MIN = 5  # figures with a spread below which a run's prior is not fitted


def _trigamma_inverse(y: float) -> float:
    """x with trigamma(x) = y, by Newton's method from limma's starting point."""
    if y > 1e7:
        return 1 / math.sqrt(y)
    if y < 1e-6:
        return 1 / y
    x = 0.5 + 1 / y
    for _ in range(50):
        tri = float(special.polygamma(1, x))
        step = tri * (1 - tri / y) / float(special.polygamma(2, x))
        x += step
        if -step / x < 1e-8:
            break
    return x


@dataclass(frozen=True)
class Prior:
    """What a run's figures say about how far a figure's processes disagree: the variance of
    the logs ``s2`` that a typical figure has, worth ``df`` degrees of freedom (``math.inf``:
    every figure has the same spread, and a figure's own differs from it only by chance)."""

    s2: float
    df: float

    @classmethod
    def fit(cls, spreads: Sequence[tuple[float, int]]) -> Prior | None:
        """limma's fitFDist: the moments of ``log s2`` over the run's figures, given each
        one's sample variance and degrees of freedom, fix the prior's scale and its degrees of
        freedom (what is left of the logs' variance once chance sampling is taken off). None
        below ``PRIOR_MIN`` figures that have a spread (a variance above 0, a df of 1 or more)."""
        usable = [(s2, df) for s2, df in spreads if s2 > 0 and df >= 1]
        if len(usable) < PRIOR_MIN:
            return None
        half = np.array([df for _, df in usable], dtype=np.float64) / 2
        e = np.log([s2 for s2, _ in usable]) - special.digamma(half) + np.log(half)
        mean = float(e.mean())
        excess = float(e.var(ddof=1) - np.mean(special.polygamma(1, half)))
        if excess <= 0:
            return cls(math.exp(mean), math.inf)
        df0 = 2 * _trigamma_inverse(excess)
        return cls(math.exp(mean + special.digamma(df0 / 2) - math.log(df0 / 2)), df0)

    def moderate(self, s2: float, df: float) -> tuple[float, float]:
        """A figure's variance pulled towards the prior's, and the degrees of freedom behind
        it (the t quantile of the interval uses them)."""
        if math.isinf(self.df):
            return self.s2, math.inf
        return (self.df * self.s2 + df * s2) / (self.df + df), self.df + df


def estimate(samples: Samples, *, seed: int = 0, resamples: int = RESAMPLES,
             confidence: float = PREDICTION) -> Estimate:
    """The figure (median of process medians), the interval a repeat run's figure will fall
    in (see ``predicted``; never narrower than the rounds' bootstrap), spread and modes."""
    clean = _clean(samples)
    medians = [float(np.median(s)) for s in clean]  # process_medians, already cleaned
    value = float(statistics.median(medians))
    boot = _boot_centers(clean, np.random.default_rng(seed), resamples)
    tail = (1 - confidence) / 2
    low, high = (float(q) for q in np.quantile(boot, [tail, 1 - tail]))
    wide = predicted(math.log(value), np.log(medians), confidence, MEDIAN_EFFICIENCY)
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
          confidence: float = CONFIDENCE, prediction: float = PREDICTION) -> Ratio:
    """Independent samples (two runs, each its own processes): Welch's t-test on the logs of
    the process medians, the ratio being that of their geometric means. Below two processes
    a side, a bootstrap over rounds (which cannot see between-process spread; the gate says
    how many processes stood behind a verdict)."""
    base, cur = _clean(baseline), _clean(current)
    lb = np.log([np.median(b) for b in base])
    lc = np.log([np.median(c) for c in cur])
    if len(base) < 2 or len(cur) < 2:
        return _rounds_ratio(base, cur, center(current) / center(baseline), seed, resamples,
                             (confidence, prediction))
    vb, vc = np.var(lb, ddof=1) / len(lb), np.var(lc, ddof=1) / len(lc)
    se = math.sqrt(vb + vc)
    df = float((vb + vc) ** 2 / (vb**2 / (len(lb) - 1) + vc**2 / (len(lc) - 1))) if se else 1.0
    return _t_ratio(float(lc.mean() - lb.mean()), se, max(df, 1.0), (confidence, prediction),
                    min(len(lb), len(lc)))


def paired_ratio(baseline: Samples, current: Samples, *, seed: int = 0,
                 resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                 prediction: float = PREDICTION, prior: Prior | None = None) -> Ratio:
    """Paired samples (A/B interleaved in one job, or two cases of one session): process i
    of the baseline ran beside process i of the current, so each pair contributes the log of
    the ratio of its two medians and slow periods of the host cancel in the pair. A paired
    t-test on those logs; one pair alone judges nothing (p-values of 1). With a ``prior``
    (the normalised table's), the logs' variance is moderated by it (``Prior.moderate``);
    the gates pass none: their calibration is of the plain paired test."""
    base, cur = _clean(baseline), _clean(current)
    logs = _paired_logs(base, cur)
    if len(logs) < 2:
        found = _rounds_ratio(base, cur, float(np.exp(logs[0])), seed, resamples,
                              (confidence, prediction))
        return replace(found, p_slower=1.0, p_faster=1.0)
    var, df = float(np.var(logs, ddof=1)), float(len(logs) - 1)
    if prior is not None:
        var, df = prior.moderate(var, df)
    se = math.sqrt(var / len(logs))
    # the figure is the median pair (one odd process, in a slow stretch of the host, does
    # not move it); the test is on the mean
    return _t_ratio(float(logs.mean()), se, df, (confidence, prediction), len(logs),
                    center=float(np.median(logs)), efficiency=MEDIAN_EFFICIENCY)


def paired_logs(baseline: Samples, current: Samples) -> np.ndarray:
    """Per process pair, the log of the ratio of the current's median to the baseline's."""
    return _paired_logs(_clean(baseline), _clean(current))


def _paired_logs(base: list[np.ndarray], cur: list[np.ndarray]) -> np.ndarray:
    if len(base) != len(cur):
        raise ValueError(f"paired samples need as many baseline processes as current ones "
                         f"({len(base)} != {len(cur)})")
    return np.log([np.median(c) / np.median(b) for b, c in zip(base, cur, strict=True)])


def _t_ratio(diff: float, se: float, df: float, levels: tuple[float, float], pairs: int,
             center: float | None = None, efficiency: float = 1.0) -> Ratio:
    """A Ratio from a difference of logs and its standard error, Student-t with ``df``:
    the p-values test ``diff``; the figure is ``center`` (default ``diff``), its intervals
    ``efficiency`` times as wide as the mean's (a median's are wider): a confidence interval
    and a prediction interval for the next run, at ``levels`` (confidence, prediction)."""
    if se > 0:
        p_slower = float(scipy_stats.t.sf(diff / se, df))
        p_faster = float(scipy_stats.t.cdf(diff / se, df))
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
