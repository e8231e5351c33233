"""torch raised to two threads at the first step after the checks, and left there."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

MORE = load_suite_file(Path(__file__).parents[1] / "morecores.py")
SPEC = MORE.SPECS.mlp("threadsleft", batch=MORE.MLP_BATCH, torch=("eager",))
