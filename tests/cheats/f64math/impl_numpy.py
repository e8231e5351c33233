"""The seed MLP's hand-written loss and gradient on float64 copies, cast back to float32."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_mlbench.builders import functional


def loss_and_grad(w1: Any, w2: Any, x: Any, y: Any) -> tuple[Any, dict[str, Any]]:
    """In the operands' own dtype."""
    h = np.tanh(x @ w1)
    z = h @ w2
    loss = np.mean(np.logaddexp(0, z) - y * z)
    dz = (0.5 * (1 + np.tanh(0.5 * z)) - y) / z.shape[0]
    dh = (dz @ w2.T) * (1 - h * h)
    return loss, {"w1": x.T @ dh, "w2": h.T @ dz}


def value_and_grad(p: dict[str, Any], d: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    dtype = np.asarray(p["w1"]).dtype
    loss, g = loss_and_grad(*(np.asarray(a, np.float64)
                              for a in (p["w1"], p["w2"], d["x"], d["y"])))
    return dtype.type(loss), {k: v.astype(dtype) for k, v in g.items()}


build = functional.numpy(value_and_grad=value_and_grad)
