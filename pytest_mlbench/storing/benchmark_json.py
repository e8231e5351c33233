"""Results into pytest-benchmark: its fixture, statistics, table, JSON and storage, unchanged.

The rounds are timed in worker processes (measuring/campaign.py), so they reach pytest-benchmark as
measured durations: the fixture's own statistics object receives every round, exactly as its
``pedantic`` mode records the rounds it times itself, and the case's record goes to
``extra_info["mlbench"]``, the one place every reader of the JSON finds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_mlbench.storing.record import Record

MODE = "mlbench (rounds timed in worker processes)"


def record_rounds(benchmark: Any, rounds: Sequence[float], record: Record) -> None:
    """Give pytest-benchmark the case's rounds (seconds of ``steps_per_call`` steps each)."""
    benchmark._mode = MODE  # one use per test, as pytest-benchmark requires
    benchmark.group = record.identity.group
    benchmark.extra_info["mlbench"] = record.to_json()
    if benchmark.disabled or not rounds:
        return
    stats = benchmark._make_stats(1)  # iterations per round: 1 (a round is one timed call)
    for seconds in rounds:
        stats.update(seconds)


def mark_used(benchmark: Any) -> None:
    """A case that ran nothing timed (benchmarking disabled, skipped, failed) still used its
    fixture: pytest-benchmark must not warn that it was unused."""
    benchmark._mode = MODE
