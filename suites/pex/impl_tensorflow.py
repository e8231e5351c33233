"""Per-example clipped gradients in TensorFlow: tf.vectorized_map over a per-example
GradientTape (as TF Privacy does), clipped and averaged, stepped by Keras SGD; inside
tf.function or tf.function(jit_compile=True)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def example_loss(p: dict[str, Any], x: Any, y: Any) -> Any:
    """The loss of one example (x, y are 1-D); vectorized_map adds the batch."""
    z = tf.tanh(x[None, :] @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    return -tf.reduce_sum(y * tf.nn.log_softmax(z[0]))


def per_example_grads(p: dict[str, Any], x: Any, y: Any) -> Any:
    def one(xy: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(p)
            loss = example_loss(p, *xy)
        return loss, tape.gradient(loss, p)

    return tf.vectorized_map(one, (x, y))


def clip_and_average(g: dict[str, Any], clip: float) -> dict[str, Any]:
    norms = tf.sqrt(tf.add_n([tf.reduce_sum(tf.reshape(v, (v.shape[0], -1)) ** 2, axis=1)
                              for v in g.values()]))
    scale = tf.minimum(clip / norms, 1.0)  # tensor first: 1.0 then takes its dtype
    return {k: tf.tensordot(scale, v, axes=1) / v.shape[0] for k, v in g.items()}


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return tf.tanh(data["x"] @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return -tf.reduce_mean(tf.reduce_sum(data["y"] * tf.nn.log_softmax(forward(p, data)), -1))


def clipped_mean(p: dict[str, Any], data: dict[str, Any]) -> Any:
    """(mean loss, mean of the clipped per-example gradients): the step's direction."""
    # Read the variables once: the per-example tapes differentiate these tensors.
    values = {k: tf.identity(v) for k, v in p.items()}
    losses, g = per_example_grads(values, data["x"], data["y"])
    return tf.reduce_mean(losses), clip_and_average(g, spec.clip_norm(*p["w1"].shape))


build = functional.tensorflow(forward, loss, value_and_grad=clipped_mean)
