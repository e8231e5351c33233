"""Seed MLP in TensorFlow: variables, GradientTape, assign_sub; eager, tf.function or XLA."""

from __future__ import annotations

from typing import Any

import tensorflow as tf


def loss_fn(w1: Any, w2: Any, x: Any, y: Any) -> Any:
    z = tf.tanh(x @ w1) @ w2
    return tf.reduce_mean(tf.math.softplus(z) - y * z)


class Trainer:
    def __init__(self, case: Any) -> None:
        with case.adapter.device_scope():
            self.w1 = tf.Variable(case.params["w1"], name="w1")
            self.w2 = tf.Variable(case.params["w2"], name="w2")
        self.x, self.y, self.lr = case.data["x"], case.data["y"], case.learning_rate
        self.grads = case.compile(self._loss_and_grads)
        self.sgd_step = case.compile(self._sgd_step)

    def _loss_and_grads(self, x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(self.w1, self.w2, x, y)
        return loss, tape.gradient(loss, [self.w1, self.w2])

    def _sgd_step(self, x: Any, y: Any) -> Any:
        loss, (g1, g2) = self._loss_and_grads(x, y)
        self.w1.assign_sub(self.lr * g1)
        self.w2.assign_sub(self.lr * g2)
        return loss

    def params(self) -> dict[str, Any]:
        return {"w1": self.w1, "w2": self.w2}

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        loss, (g1, g2) = self.grads(self.x, self.y)
        return loss, {"w1": g1, "w2": g2}

    def step(self) -> Any:
        return self.sgd_step(self.x, self.y)


def build(case: Any) -> Trainer:
    return Trainer(case)
