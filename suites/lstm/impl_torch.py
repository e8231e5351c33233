"""The LSTM in PyTorch: the cell in torch ops, a Python loop over time (unrolled by
torch.compile; variants eager, jit), or torch's own LSTM kernel, the one torch.nn.LSTM calls
(torch.lstm on the spec's weights: variant eager+nnlstm; under torch.compile, torch 2.13
inductor fails on its CPU kernel, mkldnn_rnn_layer: "expected Tensor() for op")."""

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


def nnlstm(p: dict[str, Any], data: dict[str, Any]) -> Any:
    """The same cell through torch.lstm, the kernel behind torch.nn.LSTM (oneDNN on the CPU,
    cuDNN on a GPU): its gate order is the spec's (i, f, g, o), its weights the spec's
    transposed, its two biases the spec's one and a constant zero (no parameter the spec
    does not have). The transposes are copied: cuDNN takes contiguous weights only ("view
    size is not compatible" on an H200 with the views), as torch.nn.LSTM holds them."""
    x = data["x"]
    hidden = p["wh"].shape[0]
    zero = x.new_zeros(1, x.shape[0], hidden)
    weights = [p["wx"].T.contiguous(), p["wh"].T.contiguous(), p["b"], torch.zeros_like(p["b"])]
    _, h, _ = torch.lstm(x, (zero, zero), weights, True, 1, 0.0, True, False, True)
    return h[0] @ p["wo"] + p["bo"]


def objective(forward: Any) -> Any:
    def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
        log_probs = torch.log_softmax(forward(p, data), dim=-1)
        return -(data["y"] * log_probs).sum(dim=-1).mean()

    return loss


loss = objective(forward)
build = functional.torch(forward, loss, idioms={"nnlstm": (nnlstm, objective(nnlstm))})
