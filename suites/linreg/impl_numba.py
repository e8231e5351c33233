"""Linear regression with the hand-written gradient compiled by numba.njit, updated in place."""

from __future__ import annotations

from typing import Any

import numpy as np


def forward_backward(x: np.ndarray, y: np.ndarray, w: np.ndarray, b: np.ndarray,
                     consts: np.ndarray) -> Any:
    # Numba promotes float32 with any Python number to float64 (it predates NEP 50), so the
    # constants arrive as an array of the policy's dtype: 2/n and the learning rate.
    scale = consts[0]
    r = x @ w + b - y
    loss = np.mean(r * r)
    return loss, scale * (x.T @ r), scale * r.sum(axis=0)


def make_step(grads: Any) -> Any:
    """The update step calls the compiled gradient (numba needs jitted callees)."""

    def sgd_step(x: np.ndarray, y: np.ndarray, w: np.ndarray, b: np.ndarray,
                 consts: np.ndarray) -> Any:
        loss, gw, gb = grads(x, y, w, b, consts)
        lr = consts[1]
        w -= lr * gw
        b -= lr * gb
        return loss

    return sgd_step


class Trainer:
    def __init__(self, case: Any) -> None:
        self.w, self.b = case.params["w"], case.params["b"]
        self.batch = case.batch  # the step's batch: read at every step
        self.consts = np.array([2 / len(self.batch()["x"]), case.learning_rate], dtype=self.w.dtype)
        self.grads = case.compile(forward_backward)
        self.sgd_step = case.compile(make_step(self.grads.fn))

    def params(self) -> dict[str, np.ndarray]:
        return {"w": self.w, "b": self.b}

    def loss_and_grads(self) -> tuple[Any, dict[str, np.ndarray]]:
        loss, gw, gb = self.grads(self.batch()["x"], self.batch()["y"], self.w, self.b, self.consts)
        return loss, {"w": gw, "b": gb}

    def step(self) -> Any:
        return self.sgd_step(self.batch()["x"], self.batch()["y"], self.w, self.b, self.consts)


def build(case: Any) -> Trainer:
    return Trainer(case)
