"""Half of every timed step in a process of a multiprocessing pool started in build()."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

MORE = load_suite_file(Path(__file__).parents[1] / "morecores.py")
SPEC = MORE.SPECS.mlp("procpool", batch=MORE.MLP_BATCH, numpy=("eager",))
