"""Seed MLP in PyTorch: the model in torch ops; the builder steps it with torch.optim, eager
or with the whole step under torch.compile, and runs torch.func's transforms."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return torch.tanh(data["x"] @ p["w1"]) @ p["w2"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    z = forward(p, data)
    return torch.mean(F.softplus(z) - data["y"] * z)


build = functional.torch(forward, loss)
