"""float64 arithmetic inside a float32 case: the parameters, data and results stay float32 (the
policy's flags and dtypes all hold), the loss and gradient are computed on float64 copies."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("f64math", numpy=("eager",), jax=("eager",), torch=("eager", "jit"),
                 tensorflow=("eager",))
