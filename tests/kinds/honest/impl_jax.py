from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
build = functional.jax(*MODELS.jax_model())
