"""Honest controls: every framework, the same sessions, no false alarm."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.lin("honest", numpy=("eager",), jax=("eager", "jit"), torch=("eager", "jit"),
                 tensorflow=("eager", "jit"))
