"""bfloat16 arithmetic inside a float32 inference or vjp case: inputs and outputs float32."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp_tasks("bf16infer", jax=("jit",), torch=("eager",))
