"""The seed MLP's forward and loss in float64 (.double()), the loss cast back to float32:
autograd runs the backward pass in float64 too and rounds the gradients to the float32
parameters' dtype."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return torch.tanh(data["x"].double() @ p["w1"].double()) @ p["w2"].double()


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    z = forward(p, data)
    return torch.mean(F.softplus(z) - data["y"].double() * z).to(p["w1"].dtype)


build = functional.torch(lambda p, data: forward(p, data).to(p["w1"].dtype), loss)
