"""Linear regression in Autograd: the loss in autograd.numpy, gradients by reverse mode."""

from __future__ import annotations

from typing import Any

import autograd
import autograd.numpy as anp


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    r = x @ p["w"] + p["b"] - y
    return anp.mean(r * r)


class Trainer:
    def __init__(self, case: Any) -> None:
        self.p = dict(case.params)
        self.x, self.y, self.lr = case.data["x"], case.data["y"], case.learning_rate
        self.value_and_grad = autograd.value_and_grad(loss_fn)

    def params(self) -> dict[str, Any]:
        return self.p

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        return self.value_and_grad(self.p, self.x, self.y)

    def step(self) -> Any:
        loss, g = self.value_and_grad(self.p, self.x, self.y)
        self.p = {k: w - self.lr * g[k] for k, w in self.p.items()}
        return loss


def build(case: Any) -> Trainer:
    return Trainer(case)
