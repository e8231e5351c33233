"""The loop baseline: one example at a time in plain NumPy with a hand-written backward pass,
clipped and summed as it goes: what a user without vmap writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import load_suite_file

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def example_loss_and_grad(p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> Any:
    """Loss and gradient of one example (x, y are 1-D)."""
    h = np.tanh(x @ p["w1"] + p["b1"])
    z = h @ p["w2"] + p["b2"]
    shifted = z - np.max(z)
    log_probs = shifted - np.log(np.sum(np.exp(shifted)))
    dz = np.exp(log_probs) - y
    da = (p["w2"] @ dz) * (1 - h * h)
    return -np.dot(y, log_probs), {"w1": np.outer(x, da), "b1": da, "w2": np.outer(h, dz),
                                   "b2": dz}


def clipped_mean(p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray, clip: float) -> Any:
    total = {k: np.zeros_like(v) for k, v in p.items()}
    loss_sum = 0.0
    for xi, yi in zip(x, y, strict=True):
        loss, g = example_loss_and_grad(p, xi, yi)
        norm = np.sqrt(sum(np.sum(v * v) for v in g.values()))
        scale = min(1.0, clip / norm)
        for k, v in g.items():
            total[k] += scale * v
        loss_sum += loss
    n = len(x)
    return loss_sum / n, {k: v / n for k, v in total.items()}


class Trainer:
    def __init__(self, case: Any) -> None:
        self.p = dict(case.params)
        self.batch, self.lr = case.batch, case.learning_rate  # read at every step
        self.clip = spec.clip_norm(case.dims["in"], case.dims["hidden"])

    def params(self) -> dict[str, np.ndarray]:
        return self.p

    def loss_and_grads(self) -> tuple[Any, dict[str, np.ndarray]]:
        return clipped_mean(self.p, self.batch()["x"], self.batch()["y"], self.clip)

    def step(self) -> Any:
        loss, g = clipped_mean(self.p, self.batch()["x"], self.batch()["y"], self.clip)
        for k, v in g.items():
            self.p[k] -= self.lr * v
        return loss


def build(case: Any) -> Trainer:
    return Trainer(case)
