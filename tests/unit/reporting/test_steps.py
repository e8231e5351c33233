"""Step detection (reporting/steps.py) on simulated per-process samples: its false-alarm rate
measured by simulation, what it finds, and what it must not call a step."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from pytest_mlbench.reporting import steps

Logs = list[np.ndarray]


def history(rng: np.random.Generator, n: int = 40, *, step_at: int | None = None,
            size: float = 0.15, host: float = 0.01, procs: int | Sequence[int] = 3,
            between: float = 0.02, slow_days: float = 0.0) -> Logs:
    """Per run, the logs of its processes' medians: a level (stepping by ``size`` from run
    index ``step_at`` on), the host's run-to-run drift (``host``, normal; plus with
    probability ``slow_days`` a day 30-60% slower, heavy-tailed), and each process's own
    offset (``between``)."""
    counts = [procs] * n if isinstance(procs, int) else list(procs)
    runs = []
    for i, p in enumerate(counts):
        level = math.log1p(size) if step_at is not None and i >= step_at else 0.0
        drift = host * rng.standard_normal()
        if rng.random() < slow_days:
            drift += math.log(1.3 + 0.3 * rng.random())
        runs.append(level + drift + between * rng.standard_normal(p))
    return runs


def false_alarms(detect: Callable[[Logs, float, int], bool], alpha: float, trials: int,
                 seed: int = 7, **shape: object) -> float:
    """The share of stepless simulated histories in which ``detect`` finds a step."""
    rng = np.random.default_rng(seed)
    return sum(detect(history(rng, **shape), alpha, k)  # type: ignore[arg-type]
               for k in range(trials)) / trials


def detector(logs: Logs, alpha: float, seed: int) -> bool:
    return bool(steps.changes(logs, alpha, seed=seed))


def naive(logs: Logs, alpha: float, seed: int) -> bool:
    """A broken calibration: the largest statistic against a normal quantile for one split,
    as if the best of 35 splits had not been picked."""
    y, w = steps.levels(logs)
    from scipy import stats

    return bool(steps.scan(w, w * y).max() > stats.norm.ppf(1 - alpha / 2))


def ceiling(alpha: float, trials: int) -> float:
    """The most false alarms a test at level ``alpha`` shows in ``trials`` by chance (four
    standard errors above: a calibrated test passes this check but once in 30,000 runs)."""
    return alpha + 4 * math.sqrt(alpha * (1 - alpha) / trials)


# five kinds of stepless history: the default, a host that drifts more than processes spread,
# a host with no drift at all, one process a run, and heavy tails (one day in ten 30-60% slow)
SHAPES = [{}, {"host": 0.05}, {"host": 0.0}, {"procs": 1}, {"slow_days": 0.1},
          {"procs": [3, 5] * 20}]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: ",".join(map(str, s.items())) or "plain")
def test_false_alarm_rate_holds_its_level_by_simulation(shape: dict[str, object]) -> None:
    """At a per-case level of 5%, 300 stepless histories of 40 runs show about 15 steps
    (a Monte Carlo permutation test is exact at its level, whatever the noise's shape)."""
    rate = false_alarms(detector, 0.05, 300, **shape)
    assert 0.01 < rate <= ceiling(0.05, 300), rate


def test_the_simulation_catches_a_miscalibrated_detector() -> None:
    """The same check fails a detector that compares the best of every split with one
    split's threshold: it cries step in about a third of stepless histories."""
    rate = false_alarms(naive, 0.05, 300)
    assert rate > ceiling(0.05, 300), rate


def test_finds_a_15_percent_step_at_its_run() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        found = steps.changes(history(rng, step_at=24), 0.01 / 90, seed=1)
        assert [at for at, _ in found] == [24]
        assert found[0][1] <= 0.01 / 90


def test_two_steps_are_both_found_by_segmentation() -> None:
    rng = np.random.default_rng(4)
    logs = history(rng, step_at=12)
    logs = [x + (math.log(0.8) if i >= 30 else 0.0) for i, x in enumerate(logs)]
    assert [at for at, _ in steps.changes(logs, 0.001, seed=0)] == [12, 30]


def test_one_slow_day_is_no_step() -> None:
    """A run 60% slower (a busy host) anywhere, even last, does not make a step."""
    rng = np.random.default_rng(5)
    for where in (0, 20, 37, 39):
        logs = history(rng)
        logs[where] = logs[where] + math.log(1.6)
        assert steps.changes(logs, 0.001, seed=where) == []


def test_a_step_is_placed_min_runs_from_either_end() -> None:
    """A step that began in the last two runs shows, if at all, at the third run from the
    end: a stretch of MIN_RUNS runs stands on each side of every step found."""
    rng = np.random.default_rng(6)
    assert [a for a, _ in steps.changes(history(rng, step_at=37, size=0.5), 0.001)] == [37]
    for seed in range(5):
        found = steps.changes(history(rng, step_at=38, size=0.5), 0.001, seed=seed)
        assert [a for a, _ in found] in ([], [37])


def test_identical_runs_are_no_step() -> None:
    assert steps.changes([np.zeros(3)] * 20, 0.001) == []


def test_sizes_are_medians_between_neighbouring_steps() -> None:
    figures = [1.0] * 10 + [1.2] * 10 + [0.6] * 10
    assert steps.sizes(figures, [10, 20]) == pytest.approx([0.2, -0.5])
