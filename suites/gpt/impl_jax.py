"""The GPT in JAX: jnp indexing for the embeddings, causal attention written out (variants
eager, jit) or through jax.nn.dot_product_attention (variant jit+sdpa), optax's integer-label
cross-entropy; op by op or under jax.jit, stepped by optax's Adam."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import optax

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

spec = load_suite_file(Path(__file__).with_name("spec.py"))


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
    """softmax(Q K^T / sqrt(d_head) + causal mask) V, op by op; each (B, T, heads, d_head)."""
    q, k, v = (jnp.swapaxes(x, 1, 2) for x in (q, k, v))  # (B, heads, T, d_head)
    t = q.shape[-2]
    scores = q @ jnp.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    causal = jnp.tril(jnp.ones((t, t), dtype=bool))
    weights = jax.nn.softmax(wide(jnp.where(causal, scores, -jnp.inf)), axis=-1).astype(v.dtype)
    return jnp.swapaxes(weights @ v, 1, 2)


def sdpa(q: Any, k: Any, v: Any) -> Any:
    """The same through jax.nn.dot_product_attention (XLA's own attention; cuDNN's fused
    kernel where the GPU has it), scale 1 / sqrt(d_head) by default."""
    return jax.nn.dot_product_attention(q, k, v, is_causal=True)


def attention(a: Any, w: Any, heads: int, attend: Any = written_out) -> Any:
    b, t, d = a.shape
    qkv = (a @ w).reshape(b, t, 3, heads, d // heads)
    return attend(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]).reshape(b, t, d)


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
            h = h + jax.nn.gelu(m, approximate=True) @ blk["fc2_w"] + blk["fc2_b"]
        return layer_norm(h, p["lnf_g"], p["lnf_b"]) @ p["wte"].T

    def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
        logits = wide(forward(p, data))
        return optax.softmax_cross_entropy_with_integer_labels(logits, data["targets"]).mean()

    return forward, loss


forward, loss = model(written_out)
build = functional.jax(forward, loss, idioms={"sdpa": model(sdpa)})
