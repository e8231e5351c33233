"""Inference that answers every call with its first call's outputs."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import infer, load_suite_file

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
SPEC = MODELS.mlp("infercache", (infer(),), jax=("jit",))
