"""float64 arithmetic once the checked steps are over (training): every later step, and the
gradient asked for after timing, computed on float64 copies and cast back to float32."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("f64after", numpy=("eager",))
