"""TF32 switched on inside each timed step and off again after it."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.lin("tf32step", jax=("eager",), torch=("eager",), tensorflow=("eager",))
