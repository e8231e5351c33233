"""The CNN in JAX: lax.conv_general_dilated (NHWC, HWIO kernels) and lax.reduce_window max."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from pytest_mlbench.builders import functional


def conv3x3(x: Any, k: Any, bias: Any) -> Any:
    out = lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                   dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return out + bias


def maxpool2(x: Any) -> Any:
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    h = maxpool2(jax.nn.relu(conv3x3(data["x"], p["k1"], p["c1"])))
    h = maxpool2(jax.nn.relu(conv3x3(h, p["k2"], p["c2"])))
    return h.reshape(h.shape[0], -1) @ p["w"] + p["b"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    log_probs = jax.nn.log_softmax(forward(p, data), axis=-1)
    return -jnp.mean(jnp.sum(data["y"] * log_probs, axis=-1))


build = functional.jax(forward, loss)
