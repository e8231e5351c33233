"""The seed MLP's forward in float64, cast back to float32 before the loss."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("f64fwd", torch=("eager",))
