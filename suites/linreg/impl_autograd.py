"""Linear regression in Autograd: the model in autograd.numpy, gradients by reverse mode,
the spec's SGD update applied at the policy dtype."""

from __future__ import annotations

from typing import Any

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return data["x"] @ p["w"] + p["b"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    r = forward(p, data) - data["y"]
    return (r * r).mean()


build = functional.autograd(forward, loss)
