"""The parameters drift to float64 after the checked steps of an fp32 case."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.lin("f64drift", numpy=("eager",))
