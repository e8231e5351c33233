"""Seed MLP in JAX: the model in jax.numpy; the builder runs it op by op (eager) or under
jax.jit, with optax's optimizer for whatever task the case is."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return jnp.tanh(data["x"] @ p["w1"]) @ p["w2"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    z = forward(p, data)
    return jnp.mean(jnp.logaddexp(0, z) - data["y"] * z)


build = functional.jax(forward, loss)
