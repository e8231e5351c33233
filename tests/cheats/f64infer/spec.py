"""float64 arithmetic inside a float32 inference or vjp case: inputs and outputs float32."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
_SPEC = SPECS.mlp_tasks("f64infer", numpy=("eager",), jax=("eager",), torch=("eager",))
SPEC = replace(_SPEC, unsupported={**_SPEC.unsupported, ("jax", "vjp"): "the cheat computes "
                                   "in NumPy, which jax.vjp cannot trace"})
