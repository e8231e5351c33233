"""The LSTM in PyTorch: the cell in torch ops, a Python loop over time (unrolled by
torch.compile)."""

from __future__ import annotations

from typing import Any

import torch

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    x = data["x"]
    b, steps, n_in = x.shape
    hidden = p["wh"].shape[0]
    xw = (x.reshape(b * steps, n_in) @ p["wx"] + p["b"]).reshape(b, steps, 4 * hidden)
    h = c = None
    for t in range(steps):
        z = xw[:, t] if h is None else xw[:, t] + h @ p["wh"]
        i, f, g, o = z.chunk(4, dim=-1)
        i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
        c = i * g if c is None else f * c + i * g
        h = o * torch.tanh(c)
    return h @ p["wo"] + p["bo"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    log_probs = torch.log_softmax(forward(p, data), dim=-1)
    return -(data["y"] * log_probs).sum(dim=-1).mean()


build = functional.torch(forward, loss)
