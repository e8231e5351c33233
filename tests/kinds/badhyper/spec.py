"""Momentum 0.8 in the framework's optimizer where the spec says 0.9."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file, momentum, train

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
SPEC = MODELS.mlp("badhyper", (train(momentum(0.05, 0.9)),), jax=("eager",))
