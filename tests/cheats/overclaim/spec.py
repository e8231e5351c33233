"""Honest work, but a FLOP count a million times what the step does."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.lin("overclaim", flops_scale=10**6, numpy=("eager",))
