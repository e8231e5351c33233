"""Softmax regression in NumPy: a hand-written value_and_grad (another summation order than
the spec's: the softmax's normaliser by logsumexp), the spec's update at the policy dtype."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_mlbench.builders import functional


def value_and_grad(p: dict[str, Any], data: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    x, y = data["x"], data["y"]
    z = x @ p["w"]
    top = z.max(axis=1, keepdims=True)
    lse = top + np.log(np.sum(np.exp(z - top), axis=1, keepdims=True))
    loss = np.mean(lse[:, 0] - np.einsum("nc,nc->n", y, z))
    return loss, {"w": np.einsum("nd,nc->dc", x, np.exp(z - lse) - y) / x.shape[0]}


build = functional.numpy(value_and_grad=value_and_grad)
