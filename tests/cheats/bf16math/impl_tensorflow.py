"""The seed MLP's matmuls on tf.cast bfloat16 copies, the result cast back to float32."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    w1, w2, x = (tf.cast(a, tf.bfloat16) for a in (p["w1"], p["w2"], data["x"]))
    return tf.cast(tf.tanh(x @ w1) @ w2, p["w1"].dtype)


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    z = forward(p, data)
    return tf.reduce_mean(tf.math.softplus(z) - data["y"] * z)


build = functional.tensorflow(forward, loss)
