"""The honest mlp model built as if the policy were fp32: amp silently ignored, the
arithmetic at float32 (a model whose layers never read the policy)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file
from pytest_mlbench.precision import POLICIES

HONEST = load_suite_file(Path(__file__).parents[1] / "specs.py").honest("mlp", "tensorflow")


def build(case: Any) -> Any:
    return HONEST.build(replace(case, policy=POLICIES["fp32"]))
