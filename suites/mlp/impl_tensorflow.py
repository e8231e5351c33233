"""Seed MLP in TensorFlow: the model in tf ops on tf.Variables; the builder steps it with a
Keras optimizer, eager, under tf.function or tf.function(jit_compile=True)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return tf.tanh(data["x"] @ p["w1"]) @ p["w2"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    z = forward(p, data)
    return tf.reduce_mean(tf.math.softplus(z) - data["y"] * z)


build = functional.tensorflow(forward, loss)
