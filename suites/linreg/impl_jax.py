"""Linear regression in JAX: the model in jax.numpy; the builder steps it op by op (eager) or
under jax.jit, with optax's SGD."""

from __future__ import annotations

from typing import Any

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return data["x"] @ p["w"] + p["b"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    r = forward(p, data) - data["y"]
    return (r * r).mean()


build = functional.jax(forward, loss)
