"""A bias that trains after the checked steps and is never reported."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.lin("hiddenbias", numpy=("eager",))
