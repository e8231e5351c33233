"""Linear regression in PyTorch: the model in torch ops; the builder steps it with
torch.optim.SGD, eager or with the whole step under torch.compile."""

from __future__ import annotations

from typing import Any

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return data["x"] @ p["w"] + p["b"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    r = forward(p, data) - data["y"]
    return (r * r).mean()


build = functional.torch(forward, loss)
