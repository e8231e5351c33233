"""Seed MLP in plain NumPy with a hand-written backward pass, updated in place."""

from __future__ import annotations

from typing import Any

import numpy as np


def value_and_grad(p: dict[str, np.ndarray], data: dict[str, np.ndarray]) -> Any:
    """The loss and its hand-derived gradient at the arrays' own dtype (suites/mlp_optim
    steps any optimizer with it)."""
    x, y = data["x"], data["y"]
    h = np.tanh(x @ p["w1"])
    z = h @ p["w2"]
    loss = np.mean(np.logaddexp(0, z) - y * z)
    dz = (0.5 * (1 + np.tanh(0.5 * z)) - y) / z.shape[0]
    dh = (dz @ p["w2"].T) * (1 - h * h)
    return loss, {"w1": x.T @ dh, "w2": h.T @ dz}


class Trainer:
    def __init__(self, case: Any) -> None:
        self.w1, self.w2 = case.params["w1"], case.params["w2"]
        self.batch, self.lr = case.batch, case.learning_rate  # read at every step

    def params(self) -> dict[str, np.ndarray]:
        return {"w1": self.w1, "w2": self.w2}

    def loss_and_grads(self) -> tuple[Any, dict[str, np.ndarray]]:
        return value_and_grad(self.params(), self.batch())  # type: ignore[no-any-return]

    def step(self) -> Any:
        loss, g = self.loss_and_grads()
        self.w1 -= self.lr * g["w1"]
        self.w2 -= self.lr * g["w2"]
        return loss


def build(case: Any) -> Trainer:
    return Trainer(case)
