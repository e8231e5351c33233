"""Linear regression in TensorFlow: variables, GradientTape, assign_sub; eager, tf.function
or tf.function(jit_compile=True)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf


def loss_fn(w: Any, b: Any, x: Any, y: Any) -> Any:
    r = x @ w + b - y
    return tf.reduce_mean(r * r)


class Trainer:
    def __init__(self, case: Any) -> None:
        with case.adapter.device_scope():
            self.w = tf.Variable(case.params["w"], name="w")
            self.b = tf.Variable(case.params["b"], name="b")
        self.x, self.y, self.lr = case.data["x"], case.data["y"], case.learning_rate
        self.grads = case.compile(self._loss_and_grads)
        self.sgd_step = case.compile(self._sgd_step)

    def _loss_and_grads(self, x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(self.w, self.b, x, y)
        return loss, tape.gradient(loss, [self.w, self.b])

    def _sgd_step(self, x: Any, y: Any) -> Any:
        loss, (gw, gb) = self._loss_and_grads(x, y)
        self.w.assign_sub(self.lr * gw)
        self.b.assign_sub(self.lr * gb)
        return loss

    def params(self) -> dict[str, Any]:
        return {"w": self.w, "b": self.b}

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        loss, (gw, gb) = self.grads(self.x, self.y)
        return loss, {"w": gw, "b": gb}

    def step(self) -> Any:
        return self.sgd_step(self.x, self.y)


def build(case: Any) -> Trainer:
    return Trainer(case)
