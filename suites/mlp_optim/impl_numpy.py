"""The seed MLP in NumPy with its hand-written backward pass (as suites/mlp/impl_numpy.py),
stepped by the spec's own update at the policy dtype: NumPy has no optimizer."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_mlbench.builders import functional


def value_and_grad(p: dict[str, np.ndarray], data: dict[str, np.ndarray]) -> Any:
    x, y = data["x"], data["y"]
    h = np.tanh(x @ p["w1"])
    z = h @ p["w2"]
    loss = np.mean(np.logaddexp(0, z) - y * z)
    dz = (0.5 * (1 + np.tanh(0.5 * z)) - y) / z.shape[0]
    dh = (dz @ p["w2"].T) * (1 - h * h)
    return loss, {"w1": x.T @ dh, "w2": h.T @ dz}


build = functional.numpy(value_and_grad=value_and_grad)
