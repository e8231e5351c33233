"""torch.autocast to bfloat16 on the CPU around the seed MLP's forward pass."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = torch.tanh(data["x"] @ p["w1"]) @ p["w2"]
    return z.to(p["w1"].dtype)


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    z = forward(p, data)
    return torch.mean(F.softplus(z) - data["y"] * z)


build = functional.torch(forward, loss)
