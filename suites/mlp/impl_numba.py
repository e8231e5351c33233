"""Seed MLP with hand-written gradients compiled by numba.njit (nopython), updated in place."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba.extending import register_jitable


# register_jitable: sgd_step calls it as compiled code, with no closure over a compiled
# function (numba's cache keys a closure by its cells' pickle, and a dispatcher pickles
# differently in every process: sgd_step then compiled again in every fresh process)
@register_jitable
def forward_backward(x: np.ndarray, y: np.ndarray, w1: np.ndarray, w2: np.ndarray,
                     consts: np.ndarray) -> Any:
    # Numba promotes float32 with any Python number to float64 (it predates NEP 50), so the
    # constants arrive as an array of the policy's dtype: 0, 1/2, 1, 1/batch.
    zero, half, one, inv_batch = consts[0], consts[1], consts[2], consts[3]
    h = np.tanh(x @ w1)
    z = h @ w2
    # softplus(z) - y z, written stably because numba has no logaddexp
    loss = np.mean(np.maximum(z, zero) + np.log1p(np.exp(-np.abs(z))) - y * z)
    dz = (half * (one + np.tanh(half * z)) - y) * inv_batch
    dh = (dz @ w2.T) * (one - h * h)
    return loss, x.T @ dh, h.T @ dz


def sgd_step(x: np.ndarray, y: np.ndarray, w1: np.ndarray, w2: np.ndarray,
             consts: np.ndarray) -> Any:
    loss, g1, g2 = forward_backward(x, y, w1, w2, consts)
    lr = consts[4]
    w1 -= lr * g1
    w2 -= lr * g2
    return loss


class Trainer:
    def __init__(self, case: Any) -> None:
        self.w1, self.w2 = case.params["w1"], case.params["w2"]
        self.batch = case.batch  # the step's batch: read at every step
        batch = self.batch()["x"].shape[0]
        self.consts = np.array([0, 0.5, 1, 1 / batch, case.learning_rate], dtype=self.w1.dtype)
        self.grads = case.compile(forward_backward)
        self.sgd_step = case.compile(sgd_step)

    def params(self) -> dict[str, np.ndarray]:
        return {"w1": self.w1, "w2": self.w2}

    def loss_and_grads(self) -> tuple[Any, dict[str, np.ndarray]]:
        loss, g1, g2 = self.grads(self.batch()["x"], self.batch()["y"], self.w1, self.w2, self.consts)
        return loss, {"w1": g1, "w2": g2}

    def step(self) -> Any:
        return self.sgd_step(self.batch()["x"], self.batch()["y"], self.w1, self.w2, self.consts)


def build(case: Any) -> Trainer:
    return Trainer(case)
