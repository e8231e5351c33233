"""Process-level statistics: a figure and the interval the next run will actually show.

Variance on a shared machine lives between processes (thread placement, memory layout, the
host's neighbours), not between the rounds of one process. So every estimate here is built
from per-process samples: the figure is the median of the per-process medians, and its
interval comes from a hierarchical bootstrap that resamples processes first and rounds within
each process second (so one process's many rounds cannot pretend to be many processes).

Processes that disagree by more than ``UNSTABLE`` are flagged, pyperf-style, and their modes
(clusters of process medians) are reported rather than averaged away.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

UNSTABLE = 0.10  # process medians further apart than this (max/min - 1) flag a figure unstable
CONFIDENCE = 0.95
RESAMPLES = 2000

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


def center(samples: Samples) -> float:
    """Median of the per-process medians."""
    return float(statistics.median(float(np.median(s)) for s in _clean(samples)))


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


def _boot_centers(samples: list[np.ndarray], rng: np.random.Generator,
                  resamples: int) -> np.ndarray:
    """Bootstrap distribution of ``center``: processes resampled, then rounds within each.

    Vectorised: each process's round-resampled medians are drawn once (``resamples`` of
    them), and every pick of a process in a resample takes one of those at random, which
    draws from the same distribution as resampling its rounds afresh (a Python loop over
    resamples cost ~0.2 s per figure, seconds per gate)."""
    n = len(samples)
    inner = np.stack([np.median(s[rng.integers(0, len(s), size=(resamples, len(s)))], axis=1)
                      for s in samples])  # (process, resample)
    picks = rng.integers(0, n, size=(resamples, n))
    draws = rng.integers(0, resamples, size=(resamples, n))
    return np.median(inner[picks, draws], axis=1)


def estimate(samples: Samples, *, seed: int = 0, resamples: int = RESAMPLES,
             confidence: float = CONFIDENCE) -> Estimate:
    """The figure, its bootstrap interval, spread and modes of per-process samples."""
    clean = _clean(samples)
    medians = [float(np.median(s)) for s in clean]
    boot = _boot_centers(clean, np.random.default_rng(seed), resamples)
    tail = (1 - confidence) / 2
    low, high = (float(q) for q in np.quantile(boot, [tail, 1 - tail]))
    value = float(statistics.median(medians))
    return Estimate(value, min(low, value), max(high, value), len(clean),
                    sum(len(s) for s in clean), max(medians) / min(medians) - 1,
                    modes(medians))


@dataclass(frozen=True)
class Ratio:
    """``current / baseline`` with its interval and a one-sided p-value for "slower"."""

    value: float
    low: float
    high: float
    p_slower: float
    p_faster: float

    @property
    def change(self) -> float:
        return self.value - 1


def ratio(baseline: Samples, current: Samples, *, seed: int = 0, resamples: int = RESAMPLES,
          confidence: float = CONFIDENCE) -> Ratio:
    """Independent samples (two runs, each its own processes): ratio of the centres, with
    both bootstrap distributions drawn independently."""
    base, cur = _clean(baseline), _clean(current)
    rng = np.random.default_rng(seed)
    boot = _boot_centers(cur, rng, resamples) / _boot_centers(base, rng, resamples)
    return _ratio_from(center(current) / center(baseline), boot, confidence)


def paired_ratio(baseline: Samples, current: Samples, *, seed: int = 0,
                 resamples: int = RESAMPLES, confidence: float = CONFIDENCE) -> Ratio:
    """Paired samples (A/B interleaved in one job): process i of the baseline ran beside
    process i of the current, so the unit of resampling is the pair, and each pair
    contributes the ratio of its two medians. Slow periods of the host cancel in the pair."""
    base, cur = _clean(baseline), _clean(current)
    if len(base) != len(cur):
        raise ValueError(f"paired samples need as many baseline processes as current ones "
                         f"({len(base)} != {len(cur)})")
    logs = np.log([np.median(c) / np.median(b) for b, c in zip(base, cur, strict=True)])
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(logs), size=(resamples, len(logs)))
    boot = np.exp(np.median(logs[picks], axis=1))
    return _ratio_from(float(np.exp(np.median(logs))), boot, confidence)


def _ratio_from(value: float, boot: np.ndarray, confidence: float) -> Ratio:
    tail = (1 - confidence) / 2
    low, high = (float(q) for q in np.quantile(boot, [tail, 1 - tail]))
    # one-sided p-values from the bootstrap distribution, never exactly 0
    floor = 1 / (len(boot) + 1)
    p_slower = max(float(np.mean(boot <= 1.0)), floor)
    p_faster = max(float(np.mean(boot >= 1.0)), floor)
    return Ratio(value, min(low, value), max(high, value), p_slower, p_faster)
