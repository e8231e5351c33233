"""ViT in TensorFlow: ``forward(params, data)`` on the spec's model tree (spec.to_model); the
builder keeps it in tf.Variables and steps it with a Keras optimizer, eager, under tf.function
or tf.function(jit_compile=True) (XLA). Attention written out, or through
keras.ops.dot_product_attention (variant xla+sdpa)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def patchify(x: Any, patch: int) -> Any:
    b, s, _, c = x.shape
    g = s // patch
    x = tf.transpose(tf.reshape(x, (b, g, patch, g, patch, c)), (0, 1, 3, 2, 4, 5))
    return tf.reshape(x, (b, g * g, patch * patch * c))


def dense(h: Any, w: Any, b: Any) -> Any:
    # tf.matmul of (B, N, D) by (D, E) would be a broadcast batch matmul; one 2-D matmul over
    # all tokens is what jax and torch lower the same product to.
    n_in, n_out = w.shape
    out = tf.reshape(h, (-1, n_in)) @ w + b
    return tf.reshape(out, (*h.shape[:-1], n_out))


def layer_norm(h: Any, g: Any, b: Any) -> Any:
    mean, var = tf.nn.moments(h, axes=[-1], keepdims=True)
    return (h - mean) / tf.sqrt(var + spec.LN_EPS) * g + b


def gelu(a: Any) -> Any:
    # tf.nn.gelu(approximate=True) is this same composite, but casts 0.044715 through float32
    # (math_ops.cast of a Python float), which shifts float64 results by ~1e-9.
    return 0.5 * a * (1.0 + tf.tanh(spec.GELU_C * (a + 0.044715 * a * a * a)))


def attention(a: Any, blk: dict[str, Any], heads: int) -> Any:
    """Explicit attention: softmax(Q K^T / sqrt(d_head)) V, no fused kernel."""
    b, n, d = a.shape
    qkv = tf.reshape(dense(a, blk["qkv_w"], blk["qkv_b"]), (b, n, 3, heads, d // heads))
    q, k, v = tf.unstack(tf.transpose(qkv, (2, 0, 3, 1, 4)))  # each (B, heads, N, d_head)
    weights = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / math.sqrt(d // heads), axis=-1)
    out = tf.reshape(tf.transpose(weights @ v, (0, 2, 1, 3)), (b, n, d))
    return dense(out, blk["proj_w"], blk["proj_b"])


def sdpa(a: Any, blk: dict[str, Any], heads: int) -> Any:
    """The same through keras.ops.dot_product_attention on (B, N, heads, d_head), with the
    scale a tensor of the scores' dtype (float32 at least): Keras's default, and a Python float
    it is given, are computed at float32 (suites/gpt/impl_tensorflow.py ``scale``)."""
    b, n, d = a.shape
    qkv = tf.reshape(dense(a, blk["qkv_w"], blk["qkv_b"]), (b, n, 3, heads, d // heads))
    q, k, v = tf.unstack(qkv, axis=2)
    dtype = tf.float64 if q.dtype == tf.float64 else tf.float32
    out = keras.ops.dot_product_attention(q, k, v,
                                          scale=tf.constant(1.0 / math.sqrt(d // heads), dtype))
    return dense(tf.reshape(out, (b, n, d)), blk["proj_w"], blk["proj_b"])


def logits(params: dict[str, Any], x: Any, patch: int, heads: int,
           attend: Any = attention) -> Any:
    """Logits (B, classes) from the model tree (spec.to_model) and NHWC images."""
    h = dense(patchify(x, patch), params["patch_w"], params["patch_b"]) + params["pos"]
    for blk in params["blocks"]:
        h = h + attend(layer_norm(h, blk["ln1_g"], blk["ln1_b"]), blk, heads)
        a = dense(layer_norm(h, blk["ln2_g"], blk["ln2_b"]), blk["fc1_w"], blk["fc1_b"])
        h = h + dense(gelu(a), blk["fc2_w"], blk["fc2_b"])
    pooled = tf.reduce_mean(layer_norm(h, params["ln_g"], params["ln_b"]), axis=1)
    return pooled @ params["head_w"] + params["head_b"]


def model(attend: Any) -> tuple[Any, Any]:
    """``(forward, loss)`` with ``attend`` as the attention."""

    def forward(params: dict[str, Any], data: dict[str, Any]) -> Any:
        x = data["x"]
        return logits(params, x, *spec.config(params["patch_w"].shape, x.shape), attend)

    def loss(params: dict[str, Any], data: dict[str, Any]) -> Any:
        log_probs = tf.nn.log_softmax(forward(params, data))
        return -tf.reduce_mean(tf.reduce_sum(data["y"] * log_probs, axis=-1))

    return forward, loss


forward, loss = model(attention)
build = functional.tensorflow(forward, loss, to_model=spec.to_model, from_model=spec.from_model,
                              idioms={"sdpa": model(sdpa)})
