"""ViT in PyTorch: ``forward(params, data)`` on the spec's model tree (spec.to_model); the
builder steps it with torch.optim, eager or with the whole step under torch.compile."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def patchify(x: Any, patch: int) -> Any:
    b, s, _, c = x.shape
    g = s // patch
    x = x.reshape(b, g, patch, g, patch, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, g * g, patch * patch * c)


def layer_norm(h: Any, g: Any, b: Any) -> Any:
    return F.layer_norm(h, h.shape[-1:], g, b, eps=spec.LN_EPS)


def written_out(q: Any, k: Any, v: Any) -> Any:
    """softmax(Q K^T / sqrt(d_head)) V, op by op; each (B, heads, N, d_head)."""
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1) @ v


def sdpa(q: Any, k: Any, v: Any) -> Any:
    """The same through torch's fused scaled_dot_product_attention (variants eager+sdpa,
    jit+sdpa)."""
    return F.scaled_dot_product_attention(q, k, v)


def attention(a: Any, blk: dict[str, Any], heads: int, attend: Any = written_out) -> Any:
    b, n, d = a.shape
    qkv = (a @ blk["qkv_w"] + blk["qkv_b"]).reshape(b, n, 3, heads, d // heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, N, d_head)
    out = attend(q, k, v).transpose(1, 2).reshape(b, n, d)
    return out @ blk["proj_w"] + blk["proj_b"]


def logits(params: dict[str, Any], x: Any, patch: int, heads: int,
           attend: Any = written_out) -> Any:
    """Logits (B, classes) from the model tree (spec.to_model) and NHWC images."""
    h = patchify(x, patch) @ params["patch_w"] + params["patch_b"] + params["pos"]
    for blk in params["blocks"]:
        h = h + attention(layer_norm(h, blk["ln1_g"], blk["ln1_b"]), blk, heads, attend)
        a = layer_norm(h, blk["ln2_g"], blk["ln2_b"]) @ blk["fc1_w"] + blk["fc1_b"]
        h = h + F.gelu(a, approximate="tanh") @ blk["fc2_w"] + blk["fc2_b"]
    pooled = layer_norm(h, params["ln_g"], params["ln_b"]).mean(dim=1)
    return pooled @ params["head_w"] + params["head_b"]


def model(attend: Any) -> tuple[Any, Any]:
    """``(forward, loss)`` with ``attend`` as the attention core."""

    def forward(params: dict[str, Any], data: dict[str, Any]) -> Any:
        x = data["x"]
        return logits(params, x, *spec.config(params["patch_w"].shape, x.shape), attend)

    def loss(params: dict[str, Any], data: dict[str, Any]) -> Any:
        """Mean softmax cross-entropy of the model tree on one batch (or one data-parallel
        shard)."""
        return -(data["y"] * torch.log_softmax(forward(params, data), dim=-1)).sum(dim=-1).mean()

    return forward, loss


forward, loss = model(written_out)
build = functional.torch(forward, loss, to_model=spec.to_model, from_model=spec.from_model,
                         idioms={"sdpa": model(sdpa)})
