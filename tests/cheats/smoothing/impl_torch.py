"""Cross-entropy with label smoothing 0.1 (``F.cross_entropy(..., label_smoothing=0.1)``, the
usual image-classification recipe, left in a benchmark's loss): the gradients are a few
percent off, the kind of bug a tolerance loose enough for a CNN's kinks must still see."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

CNN = load_suite_file(Path(__file__).parents[2] / "models" / "cnn" / "impl_torch.py")
SMOOTHING = 0.1


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    y = data["y"] * (1 - SMOOTHING) + SMOOTHING / data["y"].shape[-1]
    return -(y * torch.log_softmax(CNN.forward(p, data), dim=-1)).sum(dim=-1).mean()


build = functional.torch(CNN.forward, loss, to_model=CNN.to_model, from_model=CNN.from_model)
