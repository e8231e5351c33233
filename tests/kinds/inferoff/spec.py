"""Inference outputs off by 1e-3."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import infer, load_suite_file

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
SPEC = MODELS.mlp("inferoff", (infer(),), jax=("eager",))
