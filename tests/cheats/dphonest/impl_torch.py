"""The project's seed MLP in torch (suites/mlp): single-device as it is, data-parallel through the
loss the harness derives from its functional loss."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

build = load_suite_file(Path(__file__).parents[1] / "specs.py").honest("mlp", "torch").build
