"""The CNN in PyTorch: F.conv2d and F.max_pool2d in NCHW. The layouts torch wants are made once,
at build: kernels (out, in, h, w), and the head's rows in (channel, row, column) order so the
NCHW activations flatten straight into it; from_model maps them back to the spec's. Variants
eager+cl and jit+cl keep images and kernels in torch.channels_last memory format, as torch's
performance guide advises for convolutions (the images arrive NHWC, so only the kernels
move)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from pytest_mlbench.builders import functional


def to_model(p: dict[str, Any]) -> dict[str, Any]:
    c2, (flat, k) = p["k2"].shape[3], p["w"].shape
    side = math.isqrt(flat // c2)
    w = p["w"].reshape(side, side, c2, k).permute(2, 0, 1, 3).reshape(flat, k)
    return {**p, "k1": p["k1"].permute(3, 2, 0, 1), "k2": p["k2"].permute(3, 2, 0, 1), "w": w}


def from_model(m: dict[str, Any]) -> dict[str, Any]:
    c2, (flat, k) = m["k2"].shape[0], m["w"].shape
    side = math.isqrt(flat // c2)
    w = m["w"].reshape(c2, side, side, k).permute(1, 2, 0, 3).reshape(flat, k)
    return {**m, "k1": m["k1"].permute(2, 3, 1, 0), "k2": m["k2"].permute(2, 3, 1, 0), "w": w}


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    x = data["x"].permute(0, 3, 1, 2)  # the images arrive NHWC: a channels-last NCHW view
    h = F.max_pool2d(F.relu(F.conv2d(x, p["k1"], p["c1"], padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, p["k2"], p["c2"], padding=1)), 2)
    return h.flatten(1) @ p["w"] + p["b"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return -(data["y"] * torch.log_softmax(forward(p, data), dim=-1)).sum(dim=-1).mean()


def to_channels_last(p: dict[str, Any]) -> dict[str, Any]:
    """to_model's layout, the kernels then stored channels-last (the nn.Parameters the
    builder makes keep the memory format)."""
    m = to_model(p)
    return {**m, **{k: m[k].contiguous(memory_format=torch.channels_last) for k in ("k1", "k2")}}


build = functional.torch(forward, loss, to_model=to_model, from_model=from_model,
                         idioms={"cl": (forward, loss, to_channels_last, from_model)})
