"""Linear regression in JAX, functional: the same step op by op (eager) or under jax.jit."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    r = x @ p["w"] + p["b"] - y
    return jnp.mean(r * r)


def make_step(lr: float) -> Any:
    def sgd_step(p: dict[str, Any], x: Any, y: Any) -> Any:
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        return loss, jax.tree.map(lambda w, gw: w - lr * gw, p, g)

    return sgd_step


class Trainer:
    def __init__(self, case: Any) -> None:
        self.p = dict(case.params)
        self.x, self.y = case.data["x"], case.data["y"]
        self.grads = case.compile(jax.value_and_grad(loss_fn))
        self.sgd_step = case.compile(make_step(case.learning_rate))

    def params(self) -> dict[str, Any]:
        return self.p

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        return self.grads(self.p, self.x, self.y)

    def step(self) -> Any:
        loss, self.p = self.sgd_step(self.p, self.x, self.y)
        return loss


def build(case: Any) -> Trainer:
    return Trainer(case)
