"""The LSTM in JAX: the cell in jax.numpy, a Python loop over time (unrolled under jax.jit)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    x = data["x"]
    b, steps, n_in = x.shape
    hidden = p["wh"].shape[0]
    xw = (x.reshape(b * steps, n_in) @ p["wx"] + p["b"]).reshape(b, steps, 4 * hidden)
    h = c = None
    for t in range(steps):
        z = xw[:, t] if h is None else xw[:, t] + h @ p["wh"]
        i, f, g, o = jnp.split(z, 4, axis=-1)
        i, f, g, o = jax.nn.sigmoid(i), jax.nn.sigmoid(f), jnp.tanh(g), jax.nn.sigmoid(o)
        c = i * g if c is None else f * c + i * g
        h = o * jnp.tanh(c)
    return h @ p["wo"] + p["bo"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    log_probs = jax.nn.log_softmax(forward(p, data), axis=-1)
    return -jnp.mean(jnp.sum(data["y"] * log_probs, axis=-1))


build = functional.jax(forward, loss)
