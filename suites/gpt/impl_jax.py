"""The GPT in JAX: jnp indexing for the embeddings, causal attention written out (variants
eager, jit) or through jax.nn.dot_product_attention (variant jit+sdpa: XLA's attention; jit+cudnn:
cuDNN's fused flash attention, bfloat16 or float16 on an NVIDIA GPU), optax's integer-label
cross-entropy; op by op or under jax.jit, stepped by optax's Adam. Variant jit+flax is the same
model as a Flax Linen module (nn.Embed, the head tied to wte through Embed.attend;
nn.LayerNorm, nn.MultiHeadDotProductAttention with a causal mask, nn.Dense), the layer library
a JAX user writes it with, its variables the spec's weights laid out as Linen holds them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import flax.linen as nn
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
    """The same through jax.nn.dot_product_attention, scale 1 / sqrt(d_head) by default: its
    ``implementation=None`` is XLA's attention (jax 0.10: "defaults to XLA for now")."""
    return jax.nn.dot_product_attention(q, k, v, is_causal=True)


def cudnn(q: Any, k: Any, v: Any) -> Any:
    """The same through cuDNN's fused (flash) attention, as llm.c's and torch's SDPA on a GPU:
    bfloat16 or float16 inputs on an NVIDIA GPU only (the spec declares the rest)."""
    return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn")


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
            h = h + attention(a, blk["attn_w"], spec.heads(width), attend) \
                @ blk["proj_w"] + blk["proj_b"]
            m = layer_norm(h, blk["ln2_g"], blk["ln2_b"]) @ blk["fc_w"] + blk["fc_b"]
            h = h + jax.nn.gelu(m, approximate=True) @ blk["fc2_w"] + blk["fc2_b"]
        return layer_norm(h, p["lnf_g"], p["lnf_b"]) @ p["wte"].T

    def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
        logits = wide(forward(p, data))
        return optax.softmax_cross_entropy_with_integer_labels(logits, data["targets"]).mean()

    return forward, loss


# -- jit+flax: the model as a Flax Linen module --------------------------------------------

def layer_norm_layer(name: str) -> nn.LayerNorm:
    """Linen's LayerNorm computes its statistics at float32 at least by itself (as ``wide``);
    use_fast_variance=False: the spec's centred variance, not E[x^2] - E[x]^2."""
    return nn.LayerNorm(epsilon=spec.LN_EPS, use_fast_variance=False, name=name)


class Block(nn.Module):
    """A pre-norm block; dtype None in every layer but the attention: each computes at its
    inputs' and parameters' dtype, as the policy cast them."""

    heads: int

    @nn.compact
    def __call__(self, h: Any, mask: Any) -> Any:
        width = h.shape[-1]
        # the attention's dtype is its input's (what None would infer), named so that its
        # output projection brings the float32 softmax (force_fp32_for_softmax, below float32
        # only: at float64 it would round the softmax down to float32) back to bfloat16
        # where the rest of the block computes
        low = jnp.finfo(h.dtype).bits < 32
        attend = nn.MultiHeadDotProductAttention(
            num_heads=self.heads, qkv_features=width, out_features=width, dtype=h.dtype,
            deterministic=True, force_fp32_for_softmax=low,
            # the spec's q, k, v have no bias but its output projection has one, and Linen's
            # use_bias covers all four: no biases here, and the projection's as proj_b below
            use_bias=False, name="attn")
        proj_b = self.param("proj_b", nn.initializers.zeros, (width,))
        h = h + attend(layer_norm_layer("ln1")(h), mask=mask) + proj_b
        m = nn.Dense(4 * width, name="fc")(layer_norm_layer("ln2")(h))
        return h + nn.Dense(width, name="fc2")(nn.gelu(m, approximate=True))


class GPT(nn.Module):
    vocab: int
    positions: int
    width: int
    layers: int

    @nn.compact
    def __call__(self, tokens: Any) -> Any:
        wte = nn.Embed(self.vocab, self.width, name="wte")
        wpe = nn.Embed(self.positions, self.width, name="wpe")
        h = wte(tokens) + wpe(jnp.arange(tokens.shape[1]))
        mask = nn.make_causal_mask(tokens, dtype=jnp.bool_)  # (B, 1, T, T): position i sees j <= i
        for i in range(self.layers):
            h = Block(spec.heads(self.width), name=f"h{i}")(h, mask)
        return wte.attend(layer_norm_layer("lnf")(h))  # the head tied to wte


# a block's spec names -> (its Linen module, parameter) for the one-to-one ones
LINEN = {"ln1_g": ("ln1", "scale"), "ln1_b": ("ln1", "bias"),
         "ln2_g": ("ln2", "scale"), "ln2_b": ("ln2", "bias"),
         "fc_w": ("fc", "kernel"), "fc_b": ("fc", "bias"),
         "fc2_w": ("fc2", "kernel"), "fc2_b": ("fc2", "bias")}
QKV = ("query", "key", "value")  # attn_w's columns are [q | k | v]


def to_variables(p: dict[str, Any]) -> dict[str, Any]:
    """The spec's weights as GPT's variables: attn_w's q, k and v column blocks as the
    (d, heads, head_dim) kernels (head h owns consecutive head_dim columns of each block),
    proj_w as the (heads, head_dim, d) out kernel."""
    params: dict[str, Any] = {"wte": {"embedding": p["wte"]}, "wpe": {"embedding": p["wpe"]},
                              "lnf": {"scale": p["lnf_g"], "bias": p["lnf_b"]}}
    for i in range(spec.layers(p)):
        blk: dict[str, Any] = {}
        for name, (layer, part) in LINEN.items():
            blk.setdefault(layer, {})[part] = p[spec.key(i, name)]
        w = p[spec.key(i, "attn_w")]
        d = w.shape[0]
        heads = (spec.heads(d), spec.head_dim(d))
        blk["attn"] = {part: {"kernel": w[:, j * d:(j + 1) * d].reshape(d, *heads)}
                       for j, part in enumerate(QKV)}
        blk["attn"]["out"] = {"kernel": p[spec.key(i, "proj_w")].reshape(*heads, d)}
        blk["proj_b"] = p[spec.key(i, "proj_b")]
        params[f"h{i}"] = blk
    return {"params": params}


def from_variables(v: dict[str, Any]) -> dict[str, Any]:
    params = v["params"]
    flat = {"wte": params["wte"]["embedding"], "wpe": params["wpe"]["embedding"],
            "lnf_g": params["lnf"]["scale"], "lnf_b": params["lnf"]["bias"]}
    for i in range(sum(1 for k in params if k.startswith("h"))):
        blk = params[f"h{i}"]
        flat.update({spec.key(i, name): blk[layer][part]
                     for name, (layer, part) in LINEN.items()})
        kernels = [blk["attn"][part]["kernel"] for part in QKV]
        flat[spec.key(i, "attn_w")] = jnp.concatenate(
            [k.reshape(k.shape[0], -1) for k in kernels], axis=1)
        out = blk["attn"]["out"]["kernel"]
        flat[spec.key(i, "proj_w")] = out.reshape(-1, out.shape[-1])
        flat[spec.key(i, "proj_b")] = blk["proj_b"]
    return flat


def flax_forward(v: dict[str, Any], data: dict[str, Any]) -> Any:
    params = v["params"]
    vocab, width = params["wte"]["embedding"].shape
    layers = sum(1 for k in params if k.startswith("h"))
    gpt = GPT(vocab, params["wpe"]["embedding"].shape[0], width, layers)
    return gpt.apply(v, data["tokens"])


def flax_loss(v: dict[str, Any], data: dict[str, Any]) -> Any:
    logits = wide(flax_forward(v, data))
    return optax.softmax_cross_entropy_with_integer_labels(logits, data["targets"]).mean()


forward, loss = model(written_out)
build = functional.jax(forward, loss, idioms={
    "sdpa": model(sdpa), "cudnn": model(cudnn),
    "flax": (flax_forward, flax_loss, to_variables, from_variables)})
