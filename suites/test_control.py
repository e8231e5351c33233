"""The control benchmark: a fixed NumPy matmul timed in every session, which step times are
divided by in ``pytest-mlbench report --machines`` ("control matmuls"; pytest_mlbench/control.py).
Keep it in any ``-k`` selection (``-k "control or ..."``); it is part of the main job
(``-m mlbench_main``). ``pytest-mlbench init`` writes this file into a user's suites folder."""

import pytest

from pytest_mlbench import control_matmul


@pytest.mark.mlbench_main
def test_control_matmul(benchmark):
    control_matmul(benchmark)
