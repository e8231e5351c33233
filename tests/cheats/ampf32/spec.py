"""Mixed precision claimed, float32 computed: the model built as if the policy were fp32 (JAX,
TensorFlow: layers that never read the policy), or torch.autocast switched off inside it, so
every matmul runs at float32. Its gradient is as exact as float32 arithmetic leaves, far finer
than bfloat16 (amp) or float16 (amp16) compute can be: the arithmetic check says the compute
was float32, not the policy's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = replace(SPECS.mlp("ampf32", jax=("eager", "jit"), torch=("eager",),
                         tensorflow=("eager",)), default_precisions=("amp", "amp16"))
