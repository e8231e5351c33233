"""The LSTM in TensorFlow: the cell in tf ops, a Python loop over time (unrolled in
tf.function; variants eager, jit, xla) or tf.scan, a tf.while_loop over time (variants
jit+scan, xla+scan)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    x = data["x"]
    b, steps, n_in = x.shape
    hidden = p["wh"].shape[0]
    xw = tf.reshape(tf.reshape(x, (b * steps, n_in)) @ p["wx"] + p["b"], (b, steps, 4 * hidden))
    h = c = None
    for t in range(steps):
        z = xw[:, t] if h is None else xw[:, t] + h @ p["wh"]
        i, f, g, o = tf.split(z, 4, axis=-1)
        i, f, g, o = tf.sigmoid(i), tf.sigmoid(f), tf.tanh(g), tf.sigmoid(o)
        c = i * g if c is None else f * c + i * g
        h = o * tf.tanh(c)
    return h @ p["wo"] + p["bo"]


def scanned(p: dict[str, Any], data: dict[str, Any]) -> Any:
    """The same cell through tf.scan over time from a zero state (the unrolled loop's first
    step, without its h @ wh and f * c, is the same arithmetic: those terms are exact zeros)."""
    x = data["x"]
    b, steps, n_in = x.shape
    hidden = p["wh"].shape[0]
    xw = tf.reshape(tf.reshape(x, (b * steps, n_in)) @ p["wx"] + p["b"], (b, steps, 4 * hidden))

    def cell(state: Any, xt: Any) -> Any:
        h, c = state
        i, f, g, o = tf.split(xt + h @ p["wh"], 4, axis=-1)
        i, f, g, o = tf.sigmoid(i), tf.sigmoid(f), tf.tanh(g), tf.sigmoid(o)
        c = f * c + i * g
        return o * tf.tanh(c), c

    zero = tf.zeros((b, hidden), xw.dtype)
    hs, _ = tf.scan(cell, tf.transpose(xw, (1, 0, 2)), initializer=(zero, zero))
    return hs[-1] @ p["wo"] + p["bo"]


def objective(forward: Any) -> Any:
    def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
        log_probs = tf.nn.log_softmax(forward(p, data))
        return -tf.reduce_mean(tf.reduce_sum(data["y"] * log_probs, axis=-1))

    return loss


loss = objective(forward)
build = functional.tensorflow(forward, loss, idioms={"scan": (scanned, objective(scanned))})
