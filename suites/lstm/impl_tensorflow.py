"""The LSTM in TensorFlow: the cell in tf ops, a Python loop over time (unrolled in
tf.function)."""

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


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    log_probs = tf.nn.log_softmax(forward(p, data))
    return -tf.reduce_mean(tf.reduce_sum(data["y"] * log_probs, axis=-1))


build = functional.tensorflow(forward, loss)
