"""The CNN in TensorFlow: tf.nn.conv2d and tf.nn.max_pool2d, NHWC with HWIO kernels (TF's own
layouts, the spec's). Variant jit+keras is the same model as Keras layers (Conv2D,
MaxPooling2D, Flatten, Dense), the layer library a TensorFlow user writes it with, each called
with the spec's weights through Keras 3's ``stateless_call`` (Conv2D's kernel is HWIO and
Dense's (in, out): the spec's layouts; the layers' own initial weights are never used)."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # before keras is first imported

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from pytest_mlbench.builders import functional  # noqa: E402


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    h = tf.nn.conv2d(data["x"], p["k1"], 1, "SAME") + p["c1"]
    h = tf.nn.max_pool2d(tf.nn.relu(h), 2, 2, "VALID")
    h = tf.nn.conv2d(h, p["k2"], 1, "SAME") + p["c2"]
    h = tf.nn.max_pool2d(tf.nn.relu(h), 2, 2, "VALID")
    return tf.reshape(h, (h.shape[0], -1)) @ p["w"] + p["b"]


def objective(forward: Any) -> Any:
    def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
        log_probs = tf.nn.log_softmax(forward(p, data))
        return -tf.reduce_mean(tf.reduce_sum(data["y"] * log_probs, axis=-1))

    return loss


loss = objective(forward)

_LAYERS: dict[tuple[Any, ...], list[keras.layers.Layer]] = {}
WEIGHTS = {0: ("k1", "c1"), 2: ("k2", "c2"), 5: ("w", "b")}  # layer index -> its spec weights


def layers(p: dict[str, Any], x: Any) -> list[keras.layers.Layer]:
    """The Keras layers for these shapes and dtype (the policy's compute dtype), made and built
    once, outside any trace (tf.init_scope): a layer builds variables of its own, which a
    tf.function may not create on a later trace."""
    key = (p["k1"].shape[-1], p["k2"].shape[-1], p["w"].shape[-1], x.dtype.name,
           tuple(x.shape[1:]))
    if key not in _LAYERS:
        c1, c2, classes, dtype, _ = key
        with tf.init_scope():
            made = [keras.layers.Conv2D(c1, 3, padding="same", activation="relu", dtype=dtype),
                    keras.layers.MaxPooling2D(2, dtype=dtype),
                    keras.layers.Conv2D(c2, 3, padding="same", activation="relu", dtype=dtype),
                    keras.layers.MaxPooling2D(2, dtype=dtype),
                    keras.layers.Flatten(dtype=dtype),
                    keras.layers.Dense(classes, dtype=dtype)]
            shape = (None, *x.shape[1:])
            for layer in made:
                layer.build(shape)
                shape = layer.compute_output_shape(shape)
        _LAYERS[key] = made
    return _LAYERS[key]


def keras_forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    h = data["x"]
    for i, layer in enumerate(layers(p, h)):
        weights = [p[name] for name in WEIGHTS.get(i, ())]
        h, _ = layer.stateless_call(weights, [], h)
    return h


build = functional.tensorflow(forward, loss, idioms={"keras": (keras_forward,
                                                               objective(keras_forward))})
