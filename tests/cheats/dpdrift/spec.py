"""Rank 1 changes its replica outside the all-reduce after the checked steps: the ranks drift."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("dpdrift", {"torch": "eager"}, torch=("eager",))
