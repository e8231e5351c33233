"""What a run's figures say about spread, beyond one figure's few processes.

Three processes are two degrees of freedom: the sample variance of three logs is a wild guess,
and Student's t on two df is 9.9 at 99% (two-sided) and 7.0 at 1% (one-sided). The run's other
figures know more, in three ways, each where the measurements show it holds (docs/GATE.md: the
gates' statistics, and the journal entry of 2026-11-28 for the figures):

- ``Prior``: an empirical-Bayes prior on the variance, the moderated t of limma (Smyth 2004).
  Fitted over the sample variances of all the run's figures, it has a scale ``s0^2`` and is
  worth ``d0`` degrees of freedom; each figure's variance becomes
  ``(d0 s0^2 + d s^2) / (d0 + d)``, with ``d0 + d`` degrees of freedom behind its t. A figure
  whose processes agreed by chance widens, one that was merely unlucky narrows. The A/B gate's
  paired logs, the normalised table's paired ratios and a run's absolute figures (their next
  run intervals) take it.
- ``group_spreads``: the figures of a comparison group are timed together in every pass, so
  the host's moments in a pass move them alike; the shared part of their spread is estimated
  from all of them. The stored-baseline gate takes it (a flat prior over figures whose
  spreads differ group by group flagged unchanged figures of the noisiest groups too often).
- ``between_runs``: two runs on different days differ by more than their processes show; the
  matched figures of the two runs say by how much.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special  # not scipy.stats nor scipy.optimize at import: see between()

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

    @classmethod
    def of_logs(cls, logs: Iterable[np.ndarray]) -> Prior | None:
        """Fitted over figures given as their per-process logs (a figure's log process medians,
        or its paired log ratios): each one's sample variance, with n - 1 df."""
        return cls.fit([(float(np.var(x, ddof=1)), len(x) - 1) for x in logs if len(x) > 1])

    @classmethod
    def of_figures(cls, figures: Iterable[Sequence[Sequence[float]]]) -> Prior | None:
        """A run's prior on the spread of its figures' process medians (``estimate``, the
        stored-baseline gate), from each figure's per-process samples."""
        return cls.of_logs(np.log([np.median(p) for p in f if len(p)]) for f in figures)

    def moderate(self, s2: float, df: float) -> tuple[float, float]:
        """A figure's variance pulled towards the prior's, and the degrees of freedom behind
        it (the t quantile of the interval uses them)."""
        if math.isinf(self.df):
            return self.s2, math.inf
        return (self.df * self.s2 + df * s2) / (self.df + df), self.df + df


Parts = tuple[tuple[float, float], ...]  # a variance as independent parts: (variance, df) each
Between = tuple[float, float]  # a between-run variance of the logs, and its degrees of freedom
NO_BETWEEN: Between = (0.0, math.inf)


def satterthwaite(parts: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """The sum of independent variance estimates, and its degrees of freedom by Welch and
    Satterthwaite's approximation (infinite when every part is exact, 1 when all are 0)."""
    found = list(parts)
    var = sum(v for v, _ in found)
    share = sum(v * v / df for v, df in found if v > 0)
    return var, (var * var / share if share else (math.inf if var else 1.0))


def group_spreads(logs: Sequence[np.ndarray]) -> list[Parts]:
    """The spread of the figures of one comparison group in one run, from all of them (each
    figure's log process medians, in the order the passes ran): per figure, the variance of
    one process's log as two parts with their degrees of freedom. A group's cases are timed
    together in every pass, their turns interleaved, so a pass's moments of the host move
    them alike: a process's log is the figure plus its pass's effect, shared by the group,
    plus its own. The shared part is the variance of the group's mean deviation per pass
    (n - 1 df, from every figure of the group); the own part, a figure's deviations from those
    ((n - 1)(k - 1)/k df for k figures). Their sum estimates the variance of one process of
    the figure without resting on its own n processes alone: a figure whose processes agreed
    by chance still carries the pass effect its group shows (which has n - 1 degrees of
    freedom in a run, however many figures the group has; two runs give it twice that). A
    group of one figure, or of figures with unequal pass counts: each figure its own
    variance."""
    k, n = len(logs), len(logs[0]) if logs else 0
    if k < 2 or n < 2 or any(len(x) != n for x in logs):
        return [((float(np.var(x, ddof=1)), len(x) - 1.0),) for x in logs]
    dev = np.array(logs, dtype=np.float64)
    dev -= dev.mean(axis=1, keepdims=True)
    effect = dev.mean(axis=0)  # the pass's effect, shared by the group
    own = ((dev - effect) ** 2).sum(axis=1) / (n - 1) * k / (k - 1)
    shared = float(effect.var(ddof=1))  # includes 1/k of the figures' own, hence (1 - 1/k)
    own_df = (n - 1) * (k - 1) / k
    return [((shared, n - 1.0), (float(o) * (1 - 1 / k), own_df)) for o in own]


def between_runs(diffs: Sequence[float], variances: Sequence[float], dfs: Sequence[float],
                 units: int | None = None) -> Between:
    """The variance by which two runs' figures differ beyond what their processes explain
    (the random-effects variance of a meta-analysis, tau^2), from many matched figures: their
    log ratios ``diffs``, each with the ``variances`` (and ``dfs``) its processes give it.
    Paule and Mandel's estimator with a robust scale: tau^2 is where the figures'
    standardised deviations from the median ratio, ``(d - m) / sqrt(v + tau^2)``, spread as
    chance alone would spread them (Student's t, whose degrees of freedom grow as tau^2, which
    is no estimate here, outweighs ``v``), by their median absolute deviation, so that a few
    figures that did change do not count; 0 where they spread no more than that. Its degrees
    of freedom: the independent ``units`` less one, the figures by default (the figures of a
    comparison group move together between runs: the gate counts the groups; a simulation of
    this host's spread, tools/gate_power.py, found the figures' count too many). ``NO_BETWEEN``
    below ``PRIOR_MIN`` figures with a variance."""
    v = np.asarray(variances, dtype=np.float64)
    known = v > 0  # a figure whose processes agreed exactly says nothing of its scale
    d, v, df = np.asarray(diffs, dtype=np.float64)[known], v[known], np.asarray(dfs)[known]
    if len(d) < PRIOR_MIN:
        return NO_BETWEEN

    def excess(tau2: float) -> float:
        z = (d - np.median(d)) / np.sqrt(v + tau2)
        # t's quantile grows with its df: the median of the cases' is that of the median df
        chance = special.stdtrit(float(np.median(df * (1 + tau2 / v) ** 2)), 0.75)  # t.ppf
        return float(np.median(np.abs(z - np.median(z)))) - float(chance)

    free = float(max((units or len(d)) - 1, 1))
    if excess(0.0) <= 0:
        return 0.0, free
    high = 4 * (float(np.median(np.abs(d - np.median(d)))) / 0.6745) ** 2 + float(v.max())
    # imported here: scipy.optimize (and scipy.stats) cost a second of CPU to import, paid by
    # every pytest session that loads the campaign (this module comes with storing/record.py)
    from scipy import optimize
    return float(optimize.brentq(excess, 0.0, high, xtol=1e-10)), free
