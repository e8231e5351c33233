"""The LSTM in JAX: the cell in jax.numpy, a Python loop over time (unrolled under jax.jit;
variants eager, jit) or jax.lax.scan (one compiled loop body; variant jit+scan)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

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


def scanned(p: dict[str, Any], data: dict[str, Any]) -> Any:
    """The same cell through lax.scan over time from a zero state (the unrolled loop's first
    step, without its h @ wh and f * c, is the same arithmetic: those terms are exact zeros)."""
    x = data["x"]
    b, steps, n_in = x.shape
    hidden = p["wh"].shape[0]
    xw = (x.reshape(b * steps, n_in) @ p["wx"] + p["b"]).reshape(b, steps, 4 * hidden)

    def cell(state: Any, xt: Any) -> Any:
        h, c = state
        i, f, g, o = jnp.split(xt + h @ p["wh"], 4, axis=-1)
        i, f, g, o = jax.nn.sigmoid(i), jax.nn.sigmoid(f), jnp.tanh(g), jax.nn.sigmoid(o)
        c = f * c + i * g
        return (o * jnp.tanh(c), c), None

    zero = jnp.zeros((b, hidden), xw.dtype)
    (h, _), _ = lax.scan(cell, (zero, zero), jnp.swapaxes(xw, 0, 1))
    return h @ p["wo"] + p["bo"]


def objective(forward: Any) -> Any:
    def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
        log_probs = jax.nn.log_softmax(forward(p, data), axis=-1)
        return -jnp.mean(jnp.sum(data["y"] * log_probs, axis=-1))

    return loss


loss = objective(forward)
build = functional.jax(forward, loss, idioms={"scan": (scanned, objective(scanned))})
