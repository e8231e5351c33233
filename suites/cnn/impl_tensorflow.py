"""The CNN in TensorFlow: tf.nn.conv2d and tf.nn.max_pool2d, NHWC with HWIO kernels (TF's own
layouts, the spec's)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    h = tf.nn.conv2d(data["x"], p["k1"], 1, "SAME") + p["c1"]
    h = tf.nn.max_pool2d(tf.nn.relu(h), 2, 2, "VALID")
    h = tf.nn.conv2d(h, p["k2"], 1, "SAME") + p["c2"]
    h = tf.nn.max_pool2d(tf.nn.relu(h), 2, 2, "VALID")
    return tf.reshape(h, (h.shape[0], -1)) @ p["w"] + p["b"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    log_probs = tf.nn.log_softmax(forward(p, data))
    return -tf.reduce_mean(tf.reduce_sum(data["y"] * log_probs, axis=-1))


build = functional.tensorflow(forward, loss)
