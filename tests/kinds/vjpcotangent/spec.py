"""A vjp that pulls back a cotangent of ones instead of the probe's."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file, transform

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
SPEC = MODELS.mlp("vjpcotangent", (transform("vjp"),), jax=("jit",))
