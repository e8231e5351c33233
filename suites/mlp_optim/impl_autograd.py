"""The seed MLP's autograd model (suites/mlp/impl_autograd.py); the builder steps it with whichever
optimizer the task names."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

build = load_suite_file(Path(__file__).parent.parent / "mlp" / "impl_autograd.py").build
