"""The features' matmul on bfloat16 casts, the result cast back to float32."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    bf = jnp.bfloat16
    h = jnp.tanh(data["x"].astype(bf) @ p["w1"].astype(bf)).astype(p["w1"].dtype)
    return h * p["w2"].T


build = functional.jax(forward)
