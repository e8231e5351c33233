"""float16 mixed precision claimed, no loss scaling: the suite's own mlp at amp16, built as if
the policy kept no loss scale (float16 compute, float32 master weights, the loss and its
gradients unscaled), as a hand-written training loop without GradScaler or
LossScaleOptimizer trains. The check after timing says amp16 trains with a dynamic loss scale
and this trainer reports none."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = replace(SPECS.mlp("ampnoscale", jax=("jit",), torch=("eager",), tensorflow=("eager",)),
               default_precisions=("amp16",))
