"""Mixed precision claimed, bfloat16 master weights kept: the parameters (and so the
optimizer's state and every update) at bfloat16, "pure bf16" training under the amp name.
The dtype check says the amp policy keeps master weights and optimizer state at float32."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = replace(SPECS.mlp("ampmaster", jax=("jit",), torch=("eager",), tensorflow=("eager",)),
               default_precisions=("amp",))
