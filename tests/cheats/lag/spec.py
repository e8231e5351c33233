"""params() returns the previous step's parameters (a stale array), after the checks."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.lin("lag", jax=("jit",))
