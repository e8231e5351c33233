"""The test module of the kinds' session (copied beside the workload folders)."""

from __future__ import annotations

from typing import Any


def test_reference(mlbench_workload: Any) -> None:
    mlbench_workload.verify()


def test_case(mlbench_case: Any, benchmark: Any) -> None:
    mlbench_case.run(benchmark)
