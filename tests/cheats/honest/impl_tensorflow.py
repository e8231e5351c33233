"""Honest TensorFlow: a variable, GradientTape and assign_sub, eager or under tf.function."""

from __future__ import annotations

from typing import Any

import tensorflow as tf


class Trainer:
    def __init__(self, case: Any) -> None:
        with case.adapter.device_scope():
            self.w = tf.Variable(case.params["w"], name="w")
        self.batch, self.lr = case.batch, case.learning_rate  # read at every step
        self.grads = case.compile(self._loss_and_grads)
        self.sgd_step = case.compile(self._sgd_step)

    def _loss_and_grads(self, x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            r = x @ self.w - y
            loss = 0.5 * tf.reduce_mean(r * r)
        return loss, tape.gradient(loss, self.w)

    def _sgd_step(self, x: Any, y: Any) -> Any:
        loss, g = self._loss_and_grads(x, y)
        self.w.assign_sub(self.lr * g)
        return loss

    def params(self) -> dict[str, Any]:
        return {"w": self.w}

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        loss, g = self.grads(self.batch()["x"], self.batch()["y"])
        return loss, {"w": g}

    def step(self) -> Any:
        return self.sgd_step(self.batch()["x"], self.batch()["y"])


def build(case: Any) -> Trainer:
    return Trainer(case)
