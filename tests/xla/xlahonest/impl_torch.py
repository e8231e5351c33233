"""The honest trainer (tests/xla/xla_honest.py)."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

build = load_suite_file(Path(__file__).parents[1] / "xla_honest.py").build
