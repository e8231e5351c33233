"""Half of every timed step in a thread of a pool, let onto every core of the host."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

MORE = load_suite_file(Path(__file__).parents[1] / "morecores.py")
SPEC = MORE.SPECS.mlp("threadpool", batch=MORE.MLP_BATCH, numpy=("eager",))
