"""ViT in PyTorch with torch.func: ``forward(params, x)`` on the spec's model tree; one
functional step, eager or under torch.compile."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from pytest_mlbench import StepTrainer, load_suite_file

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def patchify(x: Any, patch: int) -> Any:
    b, s, _, c = x.shape
    g = s // patch
    x = x.reshape(b, g, patch, g, patch, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, g * g, patch * patch * c)


def layer_norm(h: Any, g: Any, b: Any) -> Any:
    return F.layer_norm(h, h.shape[-1:], g, b, eps=spec.LN_EPS)


def attention(a: Any, blk: dict[str, Any], heads: int) -> Any:
    """Explicit attention: softmax(Q K^T / sqrt(d_head)) V; not F.scaled_dot_product_attention,
    whose fused and flash kernels would make this a different benchmark."""
    b, n, d = a.shape
    qkv = (a @ blk["qkv_w"] + blk["qkv_b"]).reshape(b, n, 3, heads, d // heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, heads, N, d_head)
    weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // heads), dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(b, n, d)
    return out @ blk["proj_w"] + blk["proj_b"]


def forward(params: dict[str, Any], x: Any, *, patch: int, heads: int) -> Any:
    """Logits (B, classes) from the model tree (spec.to_model) and NHWC images."""
    h = patchify(x, patch) @ params["patch_w"] + params["patch_b"] + params["pos"]
    for blk in params["blocks"]:
        h = h + attention(layer_norm(h, blk["ln1_g"], blk["ln1_b"]), blk, heads)
        a = layer_norm(h, blk["ln2_g"], blk["ln2_b"]) @ blk["fc1_w"] + blk["fc1_b"]
        h = h + F.gelu(a, approximate="tanh") @ blk["fc2_w"] + blk["fc2_b"]
    pooled = layer_norm(h, params["ln_g"], params["ln_b"]).mean(dim=1)
    return pooled @ params["head_w"] + params["head_b"]


def sgd(params: dict[str, Any], g: dict[str, Any], lr: float) -> dict[str, Any]:
    """params - lr * g over the model tree (torch has no public tree_map)."""
    new = {k: w - lr * g[k] for k, w in params.items() if k != "blocks"}
    new["blocks"] = [{k: w - lr * gb[k] for k, w in blk.items()}
                     for blk, gb in zip(params["blocks"], g["blocks"], strict=True)]
    return new


def loss_fn(params: dict[str, Any], x: Any, y: Any, *, patch: int, heads: int) -> Any:
    """Mean softmax cross-entropy of the model tree on one batch (or one data-parallel
    shard: suites/dp reuses it)."""
    logits = forward(params, x, patch=patch, heads=heads)
    return -(y * torch.log_softmax(logits, dim=-1)).sum(dim=-1).mean()


def make_step(lr: float, patch: int, heads: int) -> Any:
    batch_loss = functools.partial(loss_fn, patch=patch, heads=heads)

    grad_and_value = torch.func.grad_and_value(batch_loss)

    def sgd_step(params: dict[str, Any], x: Any, y: Any) -> Any:
        # The gradients leave the step too, so loss_and_grads checks the very function that is
        # timed, and each case compiles once.
        g, loss = grad_and_value(params, x, y)
        return loss, g, sgd(params, g, lr)

    return sgd_step


def build(case: Any) -> StepTrainer:
    step = make_step(case.learning_rate, case.dims["patch"], spec.num_heads(case.dims))
    return StepTrainer(case, step, to_model=spec.to_model, from_model=spec.from_model)


def data_parallel_loss(case: Any) -> Any:
    """The same loss on the flat, spec-named params, over whatever shard a worker holds."""
    patch, heads = case.dims["patch"], spec.num_heads(case.dims)

    def loss(flat: dict[str, Any], x: Any, y: Any) -> Any:
        return loss_fn(spec.to_model(flat), x, y, patch=patch, heads=heads)

    return loss
