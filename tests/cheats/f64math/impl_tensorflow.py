"""The seed MLP's forward and loss on tf.cast float64 copies, the loss cast back to float32."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    w1, w2, x = (tf.cast(a, tf.float64) for a in (p["w1"], p["w2"], data["x"]))
    return tf.tanh(x @ w1) @ w2


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    z = forward(p, data)
    y = tf.cast(data["y"], tf.float64)
    return tf.cast(tf.reduce_mean(tf.math.softplus(z) - y * z), p["w1"].dtype)


build = functional.tensorflow(lambda p, data: tf.cast(forward(p, data), p["w1"].dtype), loss)
