"""The seed MLP's matmuls on bfloat16 casts inside the forward pass, the result cast back."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    bf = jnp.bfloat16
    h = jnp.tanh(data["x"].astype(bf) @ p["w1"].astype(bf))
    return (h @ p["w2"].astype(bf)).astype(p["w1"].dtype)


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    z = forward(p, data)
    return jnp.mean(jnp.logaddexp(0, z) - data["y"] * z)


build = functional.jax(forward, loss)
