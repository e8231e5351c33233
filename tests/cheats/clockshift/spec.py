"""The clock lives where the implementation lives, read selectively (issue 32): the runner's
clock runs at a quarter speed only when the timed round itself reads it; every other reading
in the worker (the command's span, the readings around each round) is the real clock, so the
worker's account of the turn agrees with the parent's while its rounds report a quarter."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.lin("clockshift", numpy=("eager",))
