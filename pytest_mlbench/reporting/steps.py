"""Steps in a case's history: the runs where its figure moved further than its runs vary.

A run's level is the mean of the logs of its processes' medians (the per-process samples its
record keeps); its weight is the inverse of what that level varies by: the spread between its
processes over their count (its own interval's part) plus what the host adds from one run to
the next (taken from the history's successive differences, robustly, so one step or one odd
run does not inflate it). The statistic at a split of the runs into before and after is the
weighted difference of the two sides' levels over its standard error; a case's statistic is
its largest over every split that leaves ``MIN_RUNS`` runs on each side.

Its calibration is a permutation test of the runs' order: with no step, the runs' order
carries nothing, so the observed largest statistic is one of many equally likely ones, and it
is a step only when no shuffled order of the same runs reaches it: exact at the level asked,
whatever the noise's shape (one slow day of the host is as likely anywhere, and is no step),
given only that stepless runs are exchangeable. Each case is tested at ``alpha`` over the
number of cases tested (Bonferroni), so a history with no step anywhere lists one with
probability at most ``alpha``; a case found to step is split there and each side tested
again (binary segmentation). ``tests/unit/reporting/test_steps.py`` measures the rate by
simulation. A step is listed when its size (the median figure after over the median before,
between the neighbouring steps) is at least the threshold.

Written for this project; asv's step_detect.py (a penalised piecewise-constant fit) was read
for the problem's shape, not copied."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_mlbench import tables
from pytest_mlbench.reporting.history import History, RunInfo, Series, process_logs

# runs on each side of a step at least: one or two odd runs at either end are tested as part
# of a stretch of three, so a step that began in the last two runs shows, if at all, at the
# third run from the end
MIN_RUNS = 3
FIRST_BATCH = 32  # shuffles first tried: a stepless case is usually dismissed within them
MAX_CELLS = 4_000_000  # shuffles x runs in one batch (memory: a few arrays of this size)
MAD_SD = 0.6744897501960817  # a normal variable's median absolute value over its sd


@dataclass(frozen=True)
class Step:
    series: int  # index into History.series
    at: int  # position in the series' runs of the first run after the step
    size: float  # median figure after / median figure before, minus 1
    p: float  # the permutation test's p-value bound (at most its per-case level)


@dataclass(frozen=True)
class Found:
    steps: tuple[Step, ...]
    tested: int  # cases with enough runs to be tested (2 * MIN_RUNS)
    alpha: float
    threshold: float


def levels(logs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per run its level and weight (see the module's docstring)."""
    counts = np.array([len(x) for x in logs])
    flat = np.concatenate(logs)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    y = np.add.reduceat(flat, starts) / counts
    dof = float(np.sum(counts - 1))
    within = float(np.sum((flat - np.repeat(y, counts)) ** 2)) / dof if dof else 0.0
    diffs = np.abs(np.diff(y))
    between = (float(np.median(diffs)) / MAD_SD) ** 2 / 2 if len(diffs) else 0.0
    run_to_run = max(0.0, between - within * float(np.mean(1 / counts)))
    var = run_to_run + within / counts
    weights = 1 / var if np.all(var > 0) else np.ones_like(y)
    return y - float(np.mean(y)), weights


def scan(w: np.ndarray, wy: np.ndarray, min_runs: int = MIN_RUNS) -> np.ndarray:
    """The statistic at every admissible split (last axis), for each row of ``w`` and
    ``w * y`` (one row per ordering of the runs)."""
    # runs of equal weight (as many processes each, the usual history) weigh the same in
    # every order: their running sums of weights need no shuffling
    same = bool(np.all(w == w.flat[0]))
    cw = np.arange(1, w.shape[-1] + 1) * w.flat[0] if same else np.cumsum(w, axis=-1)
    cy = np.cumsum(wy, axis=-1)
    k = np.arange(min_runs, w.shape[-1] - min_runs + 1) - 1
    wl, yl = cw[..., k], cy[..., k]
    wr, yr = cw[..., -1:] - wl, cy[..., -1:] - yl
    return np.abs(yl / wl - yr / wr) / np.sqrt(1 / wl + 1 / wr)


def test(y: np.ndarray, w: np.ndarray, alpha: float, rng: np.random.Generator,
         min_runs: int = MIN_RUNS) -> tuple[int, float] | None:
    """``(split, p bound)`` when the runs step at level ``alpha``, else None: the largest
    statistic must beat every one of ``ceil(1/alpha) - 1`` shuffles of the runs (a Monte
    Carlo permutation test whose p-value is then ``1 / (shuffles + 1) <= alpha``). A shuffle
    that reaches it ends the test at once, so a stepless case costs a few shuffles."""
    n = len(y)
    wy = w * y
    same = bool(np.all(w == w[0]))
    found = scan(w, wy, min_runs)
    best = int(np.argmax(found))
    observed = float(found[best]) * (1 - 1e-12)  # ties count against a step
    budget, done, size = math.ceil(1 / alpha - 1), 0, FIRST_BATCH
    while done < budget:
        b = min(size, budget - done)
        order = rng.permuted(np.broadcast_to(np.arange(n), (b, n)), axis=1)
        weights = w if same else w[order]  # equal weights are the same in every order
        if np.any(scan(weights, wy[order], min_runs).max(axis=1) >= observed):
            return None
        done += b
        size = min(size * 4, max(1, MAX_CELLS // n))
    return best + min_runs, 1 / (budget + 1)


def changes(logs: Sequence[np.ndarray], alpha: float, *, seed: int = 0,
            min_runs: int = MIN_RUNS) -> list[tuple[int, float]]:
    """``(first run after, p bound)`` of every step in one case's runs (binary segmentation:
    each side of a step is tested again), in order."""
    y, w = levels(logs)
    rng = np.random.default_rng(seed)
    found, todo = [], [(0, len(y))]
    while todo:
        lo, hi = todo.pop()
        if hi - lo < 2 * min_runs:
            continue
        hit = test(y[lo:hi], w[lo:hi], alpha, rng, min_runs)
        if hit is not None:
            found.append((lo + hit[0], hit[1]))
            todo += [(lo, lo + hit[0]), (lo + hit[0], hi)]
    return sorted(found)


def sizes(figures: Sequence[float], cuts: Sequence[int]) -> list[float]:
    """Each step's size: the median figure of the stretch after it over the stretch before,
    minus 1, the stretches bounded by the neighbouring steps."""
    bounds = [0, *cuts, len(figures)]
    return [float(np.median(figures[c:bounds[i + 2]]) / np.median(figures[bounds[i]:c]) - 1)
            for i, c in enumerate(cuts)]


def find(found: History, alpha: float, threshold: float, min_runs: int = MIN_RUNS) -> Found:
    """Every listed step of every case on every machine (see the module's docstring)."""
    testable = [i for i, s in enumerate(found.series) if len(s.points) >= 2 * min_runs]
    each = alpha / max(1, len(testable))
    steps = []
    for i in testable:
        series = found.series[i]
        cuts = changes(process_logs(series), each, seed=_seed(series), min_runs=min_runs)
        figures = [p.figure for p in series.points]
        for (at, p), size in zip(cuts, sizes(figures, [c for c, _ in cuts]), strict=True):
            if abs(size) >= threshold:
                steps.append(Step(i, at, size, p))
    return Found(tuple(steps), len(testable), alpha, threshold)


def _seed(series: Series) -> int:
    """The same history gives the same list: shuffles seeded by the case and machine."""
    return zlib.crc32(f"{series.machine} {series.label}".encode())


# -- the terminal's list ----------------------------------------------------------------------

HEADER = ("machine", "case", "last run before", "first run after", "step")


def rows(found: History, result: Found) -> list[list[str]]:
    """One row a step: the commit range is the runs on either side of it."""
    out = []
    for step in result.steps:
        series = found.series[step.series]
        before, after = (found.runs[series.runs[step.at - 1]], found.runs[series.runs[step.at]])
        out.append([series.machine, series.label, run_name(before, step.at, len(series.runs)),
                    run_name(after, step.at + 1, len(series.runs)), f"{step.size:+.1%}"])
    return out


def run_name(info: RunInfo, number: int, of: int) -> str:
    """``run 25/40 0025_main (a1b2c3d4, 2026-11-20)``: its place, file, commit and date."""
    said = ", ".join(x for x in (info.commit[:8], info.commit_time[:10]) if x)
    return f"run {number}/{of} {Path(info.path).stem}" + (f" ({said})" if said else "")


def lines(found: History, result: Found) -> list[str]:
    machines = len({info.machine for info in found.runs})
    head = (f"steps: {len(result.steps)} in {result.tested} case(s) with {2 * MIN_RUNS} or "
            f"more runs, {len(found.runs)} run(s) on {machines} machine(s); a history "
            f"with no step lists one with probability at most {result.alpha:g} (--alpha); "
            f"steps under {result.threshold:.0%} (--threshold) not listed")
    if not result.steps:
        return [head]
    return [head, *tables.render(HEADER, rows(found, result), left=4, indent="  ")]
