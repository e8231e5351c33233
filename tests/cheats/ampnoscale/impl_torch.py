"""The honest mlp model in torch, its trainer built without the policy's loss scale."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "specs.py").honest("mlp", "torch")


def build(case: Any) -> Any:
    return HONEST.build(replace(case, policy=replace(case.policy, loss_scale=0.0)))
