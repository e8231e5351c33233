"""The suite's own mlp in torch, unchanged."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

build = load_suite_file(Path(__file__).parents[1] / "specs.py").honest("mlp", "torch").build
