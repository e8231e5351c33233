"""A learning rate of 1e-3 where the spec says 1e-2 (the seed article's mix)."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("buglr", numpy=("eager",))
