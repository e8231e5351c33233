"""A Hessian-vector product of the outputs' sum instead of the loss."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file, transform

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
SPEC = MODELS.mlp("hvpwrong", (transform("hvp"),), jax=("jit",))
