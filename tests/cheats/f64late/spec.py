"""float64 arithmetic only once the checks before timing are over (inference): the first
probe's result is honest float32, the timed calls' are float64 cast back."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp_tasks("f64late", torch=("eager",))
