"""NumPy's BLAS at two threads (threadpoolctl) for every timed step, where the session gave one."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

MORE = load_suite_file(Path(__file__).parents[1] / "morecores.py")
SPEC = MORE.SPECS.mlp("blasup", batch=MORE.MLP_BATCH, numpy=("eager",))
