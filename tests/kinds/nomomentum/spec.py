"""A momentum step whose buffer is never updated: plain SGD claiming to be momentum."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file, momentum, train

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
SPEC = MODELS.mlp("nomomentum", (train(momentum(0.05, 0.9)),), jax=("eager",))
