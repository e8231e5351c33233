"""Linear regression in TensorFlow: the model in tf ops on tf.Variables; the builder steps it
with Keras SGD, eager, under tf.function or tf.function(jit_compile=True)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return data["x"] @ p["w"] + p["b"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    r = forward(p, data) - data["y"]
    return tf.reduce_mean(r * r)


build = functional.tensorflow(forward, loss)
