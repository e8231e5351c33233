"""A per-example Jacobian returned as [batch, in, out] instead of [batch, out, in]."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file, transform

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
SPEC = MODELS.mlp("jactranspose", (transform("jacrev"),), jax=("jit",))
