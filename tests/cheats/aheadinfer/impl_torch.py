"""The honest torch features (specs.features) answered ahead by specs.AheadAnswers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return SPECS.features(torch, p, data)


def build(case: Any) -> Any:
    return SPECS.AheadAnswers(functional.torch(forward)(case))
