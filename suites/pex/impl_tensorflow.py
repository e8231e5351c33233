"""Per-example clipped gradients in TensorFlow: tf.vectorized_map over a per-example
GradientTape (as TF Privacy does), inside tf.function or tf.function(jit_compile=True)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf

from pytest_mlbench import load_suite_file

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


class Trainer:
    def __init__(self, case: Any) -> None:
        with case.adapter.device_scope():
            self.p = {k: tf.Variable(v) for k, v in case.params.items()}
        self.x, self.y, self.lr = case.data["x"], case.data["y"], case.learning_rate
        self.clip = spec.clip_norm(case.dims["in"], case.dims["hidden"])
        self.grads = case.compile(self._loss_and_grads)
        self.dp_step = case.compile(self._dp_step)

    def _loss_and_grads(self, x: Any, y: Any) -> Any:
        # Read the variables once: the per-example tapes differentiate these tensors.
        values = {k: tf.identity(v) for k, v in self.p.items()}
        losses, g = per_example_grads(values, x, y)
        return tf.reduce_mean(losses), clip_and_average(g, self.clip)

    def _dp_step(self, x: Any, y: Any) -> Any:
        loss, update = self._loss_and_grads(x, y)
        for k, w in self.p.items():
            w.assign_sub(self.lr * update[k])
        return loss

    def params(self) -> dict[str, Any]:
        return self.p

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        return self.grads(self.x, self.y)

    def step(self) -> Any:
        return self.dp_step(self.x, self.y)


def build(case: Any) -> Trainer:
    return Trainer(case)
