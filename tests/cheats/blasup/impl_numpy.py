"""After the checked steps, every step inside threadpoolctl's limit of two BLAS threads (the
session gave one), which sets them back as the step returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits

from pytest_mlbench import load_suite_file

MORE = load_suite_file(Path(__file__).parents[1] / "morecores.py")


def two_blas_threads(inner: Any, n: int) -> Any:
    with threadpool_limits(limits=2, user_api="blas"):
        return inner.step()


def build(case: Any) -> Any:
    return MORE.SPECS.AfterChecks(MORE.honest_numpy().build(case), two_blas_threads)
