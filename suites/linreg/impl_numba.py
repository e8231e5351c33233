"""Linear regression with the hand-written gradient compiled by numba.njit, updated in place."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba.extending import register_jitable


# register_jitable: sgd_step calls it as compiled code, with no closure over a compiled
# function (numba's cache keys a closure by its cells' pickle, and a dispatcher pickles
# differently in every process: sgd_step then compiled again in every fresh process)
@register_jitable
def forward_backward(x: np.ndarray, y: np.ndarray, w: np.ndarray, b: np.ndarray,
                     consts: np.ndarray) -> Any:
    # Numba promotes float32 with any Python number to float64 (it predates NEP 50), so the
    # constants arrive as an array of the policy's dtype: 2/n and the learning rate.
    scale = consts[0]
    r = x @ w + b - y
    loss = np.mean(r * r)
    return loss, scale * (x.T @ r), scale * r.sum(axis=0)


def sgd_step(x: np.ndarray, y: np.ndarray, w: np.ndarray, b: np.ndarray,
             consts: np.ndarray) -> Any:
    loss, gw, gb = forward_backward(x, y, w, b, consts)
    lr = consts[1]
    w -= lr * gw
    b -= lr * gb
    return loss


class Trainer:
    def __init__(self, case: Any) -> None:
        self.w, self.b = case.params["w"], case.params["b"]
        self.batch = case.batch  # the step's batch: read at every step
        self.consts = np.array([2 / len(self.batch()["x"]), case.learning_rate], dtype=self.w.dtype)
        self.grads = case.compile(forward_backward)
        self.sgd_step = case.compile(sgd_step)

    def params(self) -> dict[str, np.ndarray]:
        return {"w": self.w, "b": self.b}

    def loss_and_grads(self) -> tuple[Any, dict[str, np.ndarray]]:
        loss, gw, gb = self.grads(self.batch()["x"], self.batch()["y"], self.w, self.b, self.consts)
        return loss, {"w": gw, "b": gb}

    def step(self) -> Any:
        return self.sgd_step(self.batch()["x"], self.batch()["y"], self.w, self.b, self.consts)


def build(case: Any) -> Trainer:
    return Trainer(case)
