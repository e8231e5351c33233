"""The honest mlp model, its nn.Parameters made at bfloat16 (torch.optim's state follows)."""

from __future__ import annotations

from pathlib import Path

import torch

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

HONEST = load_suite_file(Path(__file__).parents[1] / "specs.py").honest("mlp", "torch")

build = functional.torch(HONEST.forward, HONEST.loss,
                         to_model=lambda p: {k: v.to(torch.bfloat16) for k, v in p.items()},
                         from_model=dict)
