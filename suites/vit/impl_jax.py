"""ViT in JAX: ``forward(params, data)`` on the spec's model tree (spec.to_model); the builder
runs it op by op (eager) or under jax.jit, with optax's optimizer for a training task. Variant
jit+sdpa takes the attention through jax.nn.dot_product_attention (XLA's), jit+cudnn through its
cuDNN fused attention (bfloat16 or float16 on an NVIDIA GPU); variant jit+flax is the same
model as a Flax Linen module (nn.Dense on the patches, nn.LayerNorm,
nn.MultiHeadDotProductAttention, nn.Dense MLP and head), the layer library a JAX user writes
it with, its variables the spec's weights laid out as Linen holds them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import flax.linen as nn
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
    """The same through jax.nn.dot_product_attention (variant jit+sdpa; XLA's attention)."""
    return jax.nn.dot_product_attention(q, k, v)


def cudnn(q: Any, k: Any, v: Any) -> Any:
    """The same through cuDNN's fused attention (variant jit+cudnn: an NVIDIA GPU, bfloat16 or
    float16 inputs)."""
    return jax.nn.dot_product_attention(q, k, v, implementation="cudnn")


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


# -- jit+flax: the model as a Flax Linen module --------------------------------------------

def layer_norm_layer(name: str) -> nn.LayerNorm:
    """Linen's LayerNorm computes its statistics at float32 at least by itself (as ``wide``);
    use_fast_variance=False: the spec's centred variance, not E[x^2] - E[x]^2."""
    return nn.LayerNorm(epsilon=spec.LN_EPS, use_fast_variance=False, name=name)


class Block(nn.Module):
    """A pre-norm encoder block; dtype None in every layer but the attention: each computes at
    its inputs' and parameters' dtype, as the policy cast them."""

    heads: int
    mlp: int

    @nn.compact
    def __call__(self, h: Any) -> Any:
        # the attention's dtype is its input's (what None would infer), named so that its
        # output projection brings the float32 softmax (force_fp32_for_softmax, below float32
        # only: at float64 it would round the softmax down to float32) back to bfloat16
        # where the rest of the block computes; use_bias: qkv_b and proj_b
        attend = nn.MultiHeadDotProductAttention(
            num_heads=self.heads, dtype=h.dtype, deterministic=True,
            force_fp32_for_softmax=jnp.finfo(h.dtype).bits < 32, name="attn")
        h = h + attend(layer_norm_layer("ln1")(h))
        a = nn.Dense(self.mlp, name="fc1")(layer_norm_layer("ln2")(h))
        return h + nn.Dense(h.shape[-1], name="fc2")(nn.gelu(a, approximate=True))


class ViT(nn.Module):
    patch: int
    width: int
    depth: int
    mlp: int
    classes: int

    @nn.compact
    def __call__(self, x: Any) -> Any:
        patches = patchify(x, self.patch)
        pos = self.param("pos", nn.initializers.zeros, (patches.shape[1], self.width))
        h = nn.Dense(self.width, name="patch")(patches) + pos
        for i in range(self.depth):
            h = Block(self.width // spec.head_dim(self.width), self.mlp, name=f"block{i}")(h)
        pooled = jnp.mean(layer_norm_layer("ln")(h), axis=1)
        return nn.Dense(self.classes, name="head")(pooled)


# spec names -> (their Linen module, parameter) for the one-to-one ones: the model's, a block's
GLOBAL = {"patch_w": ("patch", "kernel"), "patch_b": ("patch", "bias"),
          "ln_g": ("ln", "scale"), "ln_b": ("ln", "bias"),
          "head_w": ("head", "kernel"), "head_b": ("head", "bias")}
BLOCK = {"ln1_g": ("ln1", "scale"), "ln1_b": ("ln1", "bias"),
         "ln2_g": ("ln2", "scale"), "ln2_b": ("ln2", "bias"),
         "fc1_w": ("fc1", "kernel"), "fc1_b": ("fc1", "bias"),
         "fc2_w": ("fc2", "kernel"), "fc2_b": ("fc2", "bias")}
QKV = ("query", "key", "value")  # qkv_w's columns are [q | k | v]


def nest(flat: dict[str, Any], names: dict[str, tuple[str, str]]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for name, (layer, part) in names.items():
        tree.setdefault(layer, {})[part] = flat[name]
    return tree


def to_variables(p: dict[str, Any]) -> dict[str, Any]:
    """The spec's weights as ViT's variables: qkv_w's q, k and v column blocks as the
    (d, heads, head_dim) kernels (head h owns consecutive head_dim columns of each block),
    qkv_b's as the (heads, head_dim) biases, proj_w as the (heads, head_dim, d) out kernel."""
    tree = spec.to_model(p)
    params = nest(tree, GLOBAL) | {"pos": tree["pos"]}
    for i, blk in enumerate(tree["blocks"]):
        w, b = blk["qkv_w"], blk["qkv_b"]
        d = w.shape[0]
        heads = (d // spec.head_dim(d), spec.head_dim(d))
        attn = {part: {"kernel": w[:, j * d:(j + 1) * d].reshape(d, *heads),
                       "bias": b[j * d:(j + 1) * d].reshape(heads)}
                for j, part in enumerate(QKV)}
        attn["out"] = {"kernel": blk["proj_w"].reshape(*heads, d), "bias": blk["proj_b"]}
        params[f"block{i}"] = nest(blk, BLOCK) | {"attn": attn}
    return {"params": params}


def from_variables(v: dict[str, Any]) -> dict[str, Any]:
    params = v["params"]
    tree = {name: params[layer][part] for name, (layer, part) in GLOBAL.items()}
    tree["pos"], tree["blocks"] = params["pos"], []
    for i in range(sum(1 for k in params if k.startswith("block"))):
        blk, attn = params[f"block{i}"], params[f"block{i}"]["attn"]
        kernels, biases = ([attn[part][kind] for part in QKV] for kind in ("kernel", "bias"))
        out = attn["out"]["kernel"]
        tree["blocks"].append(
            {name: blk[layer][part] for name, (layer, part) in BLOCK.items()}
            | {"qkv_w": jnp.concatenate([k.reshape(k.shape[0], -1) for k in kernels], axis=1),
               "qkv_b": jnp.concatenate([b.reshape(-1) for b in biases]),
               "proj_w": out.reshape(-1, out.shape[-1]), "proj_b": attn["out"]["bias"]})
    return spec.from_model(tree)


def flax_forward(v: dict[str, Any], data: dict[str, Any]) -> Any:
    params, x = v["params"], data["x"]
    patch_w = params["patch"]["kernel"]
    patch, _ = spec.config(patch_w.shape, x.shape)
    depth = sum(1 for k in params if k.startswith("block"))
    mlp = params["block0"]["fc1"]["kernel"].shape[1]
    vit = ViT(patch, patch_w.shape[1], depth, mlp, params["head"]["kernel"].shape[1])
    return vit.apply(v, x)


def flax_loss(v: dict[str, Any], data: dict[str, Any]) -> Any:
    log_probs = jax.nn.log_softmax(wide(flax_forward(v, data)), axis=-1)
    return -jnp.mean(jnp.sum(data["y"] * log_probs, axis=-1))


forward, loss = model(written_out)
build = functional.jax(forward, loss, to_model=spec.to_model, from_model=spec.from_model,
                       idioms={"sdpa": model(sdpa), "cudnn": model(cudnn),
                               "flax": (flax_forward, flax_loss, to_variables, from_variables)})
