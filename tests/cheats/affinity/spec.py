"""Every thread of the worker let onto every core, and torch at two threads, for every timed step."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

MORE = load_suite_file(Path(__file__).parents[1] / "morecores.py")
SPEC = MORE.SPECS.mlp("affinity", batch=MORE.MLP_BATCH, torch=("eager",))
