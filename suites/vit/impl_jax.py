"""ViT in JAX: ``forward(params, data)`` on the spec's model tree (spec.to_model); the builder
runs it op by op (eager) or under jax.jit, with optax's optimizer for a training task."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def patchify(x: Any, patch: int) -> Any:
    b, s, _, c = x.shape
    g = s // patch
    x = x.reshape(b, g, patch, g, patch, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(b, g * g, patch * patch * c)


def wide(x: Any) -> Any:
    """``x`` at float32 at least: softmax and normalisation statistics, as mixed-precision JAX
    code keeps them (bfloat16 compute under the amp policy; a no-op at float32 and float64)."""
    return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def layer_norm(h: Any, g: Any, b: Any) -> Any:
    x = wide(h)
    centred = x - jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(centred * centred, axis=-1, keepdims=True)
    return (centred / jnp.sqrt(var + spec.LN_EPS)).astype(h.dtype) * g + b


def written_out(q: Any, k: Any, v: Any) -> Any:
    """softmax(Q K^T / sqrt(d_head)) V, op by op; each (B, N, heads, d_head)."""
    q, k, v = (jnp.swapaxes(x, 1, 2) for x in (q, k, v))  # (B, heads, N, d_head)
    scores = q @ jnp.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    weights = jax.nn.softmax(wide(scores), axis=-1).astype(v.dtype)
    return jnp.swapaxes(weights @ v, 1, 2)


def sdpa(q: Any, k: Any, v: Any) -> Any:
    """The same through jax.nn.dot_product_attention (variant jit+sdpa)."""
    return jax.nn.dot_product_attention(q, k, v)


def attention(a: Any, blk: dict[str, Any], heads: int, attend: Any = written_out) -> Any:
    b, n, d = a.shape
    qkv = (a @ blk["qkv_w"] + blk["qkv_b"]).reshape(b, n, 3, heads, d // heads)
    out = attend(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]).reshape(b, n, d)
    return out @ blk["proj_w"] + blk["proj_b"]


def logits(params: dict[str, Any], x: Any, patch: int, heads: int,
           attend: Any = written_out) -> Any:
    """Logits (B, classes) from the model tree (spec.to_model) and NHWC images."""
    h = patchify(x, patch) @ params["patch_w"] + params["patch_b"] + params["pos"]
    for blk in params["blocks"]:
        h = h + attention(layer_norm(h, blk["ln1_g"], blk["ln1_b"]), blk, heads, attend)
        a = layer_norm(h, blk["ln2_g"], blk["ln2_b"]) @ blk["fc1_w"] + blk["fc1_b"]
        h = h + jax.nn.gelu(a, approximate=True) @ blk["fc2_w"] + blk["fc2_b"]
    pooled = jnp.mean(layer_norm(h, params["ln_g"], params["ln_b"]), axis=1)
    return pooled @ params["head_w"] + params["head_b"]


def model(attend: Any) -> tuple[Any, Any]:
    """``(forward, loss)`` with ``attend`` as the attention core."""

    def forward(params: dict[str, Any], data: dict[str, Any]) -> Any:
        x = data["x"]
        return logits(params, x, *spec.config(params["patch_w"].shape, x.shape), attend)

    def loss(params: dict[str, Any], data: dict[str, Any]) -> Any:
        """Mean softmax cross-entropy of the model tree on one batch (or one data-parallel
        shard)."""
        log_probs = jax.nn.log_softmax(wide(forward(params, data)), axis=-1)
        return -jnp.mean(jnp.sum(data["y"] * log_probs, axis=-1))

    return forward, loss


forward, loss = model(written_out)
build = functional.jax(forward, loss, to_model=spec.to_model, from_model=spec.from_model,
                       idioms={"sdpa": model(sdpa)})
