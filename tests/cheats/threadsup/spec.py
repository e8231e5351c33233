"""torch at two threads for every timed step, where the session gave one, set back in params()."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

MORE = load_suite_file(Path(__file__).parents[1] / "morecores.py")
SPEC = MORE.SPECS.mlp("threadsup", batch=MORE.MLP_BATCH, torch=("eager",))
