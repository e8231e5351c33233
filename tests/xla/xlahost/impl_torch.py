"""A loss that copies its parameters to the host and back (the same values, the same
gradient): every step moves device data to the host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

HONEST = load_suite_file(Path(__file__).parents[1] / "xla_honest.py")


def loss(p: dict[str, Any], d: dict[str, Any]) -> Any:
    w = p["w"].cpu().to(p["w"].device)  # differentiable: the gradient flows back through it
    r = d["x"] @ w - d["y"]
    return 0.5 * torch.mean(r * r)


build = functional.torch(HONEST.forward, loss)
