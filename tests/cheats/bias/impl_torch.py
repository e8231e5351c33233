"""suites/mlp_layers's torch.nn layers with an extra bias in the first Linear, zero-initialised,
trained by the optimizer like any parameter and never reported by params()."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "specs.py").honest("mlp_layers", "torch")


def make_model(w1: torch.Tensor, w2: torch.Tensor) -> nn.Sequential:
    model = HONEST.make_model(w1, w2)
    model[0].bias = nn.Parameter(torch.zeros(w1.shape[1], dtype=w1.dtype, device=w1.device))
    return model


class Trainer(HONEST.Trainer):  # type: ignore[misc, name-defined]
    make_model = staticmethod(make_model)


def build(case: Any) -> Trainer:
    return Trainer(case)
