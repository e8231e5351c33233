"""float32 arithmetic inside a float64 case: parameters and results float64, the loss and
gradient computed on float32 copies. The fp64 tolerance fails it norm-wise; the message says
the error is float32's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = replace(SPECS.mlp("f32math", numpy=("eager",)), default_precisions=("fp64",))
