"""bf16math's jax implementation (bfloat16 matmuls inside a float32 case)."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

build = load_suite_file(Path(__file__).parents[1] / "bf16math" / "impl_jax.py").build
