"""The features in float64 (.double()), cast back to float32; torch.func.vjp runs through the
casts, in float64."""

from __future__ import annotations

from typing import Any

import torch

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    z = torch.tanh(data["x"].double() @ p["w1"].double()) * p["w2"].double().T
    return z.to(p["w1"].dtype)


build = functional.torch(forward)
