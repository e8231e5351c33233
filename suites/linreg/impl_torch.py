"""Linear regression in PyTorch with torch.func: one functional step, eager or torch.compile."""

from __future__ import annotations

from typing import Any

import torch


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    r = x @ p["w"] + p["b"] - y
    return torch.mean(r * r)


def make_step(lr: float) -> Any:
    grad_and_value = torch.func.grad_and_value(loss_fn)

    def sgd_step(p: dict[str, Any], x: Any, y: Any) -> Any:
        g, loss = grad_and_value(p, x, y)
        return loss, {k: w - lr * g[k] for k, w in p.items()}

    return sgd_step


class Trainer:
    def __init__(self, case: Any) -> None:
        self.p = dict(case.params)
        self.x, self.y = case.data["x"], case.data["y"]
        self.grads = case.compile(torch.func.grad_and_value(loss_fn))
        self.sgd_step = case.compile(make_step(case.learning_rate))

    def params(self) -> dict[str, Any]:
        return self.p

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        g, loss = self.grads(self.p, self.x, self.y)
        return loss, g

    def step(self) -> Any:
        loss, self.p = self.sgd_step(self.p, self.x, self.y)
        return loss


def build(case: Any) -> Trainer:
    return Trainer(case)
