"""bfloat16 arithmetic inside a float32 case: parameters and results float32, the matmuls (and
their backward) in bfloat16. The seed MLP's fp32 tolerance fails it norm-wise; the message
says the error is bfloat16's."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("bf16math", jax=("eager", "jit"), torch=("eager",), tensorflow=("eager",))
