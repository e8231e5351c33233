"""The honest mlp model with autocast switched off inside it: torch arithmetic at float32."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

HONEST = load_suite_file(Path(__file__).parents[1] / "specs.py").honest("mlp", "torch")


def float32(fn: Any) -> Any:
    def run(p: Any, d: Any) -> Any:
        with torch.autocast(p["w1"].device.type, enabled=False):
            return fn(p, d)
    return run


build = functional.torch(float32(HONEST.forward), float32(HONEST.loss))
