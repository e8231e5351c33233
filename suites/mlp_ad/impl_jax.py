"""The seed MLP's jax model (suites/mlp/impl_jax.py); the builder applies the task's
transform to it."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

build = load_suite_file(Path(__file__).parent.parent / "mlp" / "impl_jax.py").build
