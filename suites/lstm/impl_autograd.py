"""The LSTM in Autograd: the cell in autograd.numpy, a Python loop over time; the
spec's SGD update at the policy dtype."""

from __future__ import annotations

from typing import Any

import autograd.numpy as anp

from pytest_mlbench.builders import functional


def sigmoid(z: Any) -> Any:
    return 0.5 * (anp.tanh(0.5 * z) + 1.0)


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    x = data["x"]
    b, steps, n_in = x.shape
    hidden = p["wh"].shape[0]
    xw = (x.reshape(b * steps, n_in) @ p["wx"] + p["b"]).reshape(b, steps, 4 * hidden)
    h = c = None
    for t in range(steps):
        z = xw[:, t] if h is None else xw[:, t] + h @ p["wh"]
        i, f, g, o = anp.split(z, 4, axis=-1)
        i, f, g, o = sigmoid(i), sigmoid(f), anp.tanh(g), sigmoid(o)
        c = i * g if c is None else f * c + i * g
        h = o * anp.tanh(c)
    return h @ p["wo"] + p["bo"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    logits = forward(p, data)
    shifted = logits - anp.max(logits, axis=-1, keepdims=True)
    log_probs = shifted - anp.log(anp.sum(anp.exp(shifted), axis=-1, keepdims=True))
    return -anp.mean(anp.sum(data["y"] * log_probs, axis=-1))


build = functional.autograd(forward, loss)
