"""The clock lives where the implementation lives (issue 32): build() replaces the clock the
worker's runner reads with one running at a quarter of the real one while it times this case,
so every round reports a quarter of its time. The parent times every turn with its own
clock."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.lin("clock", numpy=("eager",))
