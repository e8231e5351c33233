"""A transform NumPy does not have, not declared unsupported."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file, transform

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
SPEC = MODELS.mlp("undeclared", (transform("jvp"),), numpy=("eager",))
