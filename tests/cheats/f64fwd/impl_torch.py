"""The seed MLP's forward in float64 (.double()) and cast back to float32 before the loss,
which runs in float32: the loss, the parameters and every dtype the harness reads are
float32, and autograd runs the forward's backward in float64 (each gradient is correctly
rounded from a float64 computation of a float32 upstream gradient, so it is not "too
exact"; its error is below what float32 arithmetic leaves)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    wide = torch.tanh(data["x"].double() @ p["w1"].double()) @ p["w2"].double()
    return wide.to(p["w1"].dtype)


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    z = forward(p, data)
    return torch.mean(F.softplus(z) - data["y"] * z)


build = functional.torch(forward, loss)
