"""Layer APIs training an extra zero-initialised bias they never report."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("bias", jax=("eager",), torch=("eager",), tensorflow=("eager",))
