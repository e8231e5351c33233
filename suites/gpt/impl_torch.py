"""The GPT in PyTorch: tensor indexing for the embeddings, causal attention written out
(variants eager, jit) or through F.scaled_dot_product_attention (the fused kernel torch's users
call: variants eager+sdpa, jit+sdpa), F.cross_entropy; eager or with the whole step under
torch.compile, stepped by torch.optim.Adam."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def layer_norm(h: Any, g: Any, b: Any) -> Any:
    return F.layer_norm(h, h.shape[-1:], g, b, eps=spec.LN_EPS)


def written_out(q: Any, k: Any, v: Any) -> Any:
    """softmax(Q K^T / sqrt(d_head) + causal mask) V, op by op."""
    t = q.shape[-2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    return torch.softmax(scores.masked_fill(~causal, -math.inf), dim=-1) @ v


def sdpa(q: Any, k: Any, v: Any) -> Any:
    """The same through torch's fused scaled_dot_product_attention (its default scale is
    1 / sqrt(d_head))."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def attention(a: Any, w: Any, heads: int, attend: Any = written_out) -> Any:
    b, t, d = a.shape
    q, k, v = (a @ w).reshape(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4).unbind(0)
    return attend(q, k, v).transpose(1, 2).reshape(b, t, d)


def model(attend: Any) -> tuple[Any, Any]:
    """``(forward, loss)`` with ``attend`` as the attention core."""

    def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
        tokens = data["tokens"]
        width = p["wte"].shape[1]
        h = p["wte"][tokens] + p["wpe"][:tokens.shape[1]]
        for i in range(spec.layers(p)):
            blk = {n: p[spec.key(i, n)] for n in spec.BLOCK_KEYS}
            a = layer_norm(h, blk["ln1_g"], blk["ln1_b"])
            h = h + attention(a, blk["attn_w"], width // spec.HEAD_DIM, attend) \
                @ blk["proj_w"] + blk["proj_b"]
            m = layer_norm(h, blk["ln2_g"], blk["ln2_b"]) @ blk["fc_w"] + blk["fc_b"]
            h = h + F.gelu(m, approximate="tanh") @ blk["fc2_w"] + blk["fc2_b"]
        return layer_norm(h, p["lnf_g"], p["lnf_b"]) @ p["wte"].T

    def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
        logits = forward(p, data)
        # F.cross_entropy takes int64 class indices; the ids themselves stay int32
        return F.cross_entropy(logits.flatten(0, 1), data["targets"].flatten().long())

    return forward, loss


forward, loss = model(written_out)
build = functional.torch(forward, loss, idioms={"sdpa": model(sdpa)})
