"""The GPT in TensorFlow: tf.gather for the embeddings, causal attention written out (variants
eager, jit, xla) or through keras.ops.dot_product_attention (variant xla+sdpa: Keras's own
attention op, softmax at float32 at least), tf.nn.sparse_softmax_cross_entropy_with_logits;
eager, tf.function or XLA, stepped by Keras's Adam on tf.Variables."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def layer_norm(h: Any, g: Any, b: Any) -> Any:
    mean, var = tf.nn.moments(h, axes=[-1], keepdims=True)
    return (h - mean) / tf.sqrt(var + spec.LN_EPS) * g + b


def dense(h: Any, w: Any, b: Any) -> Any:
    """One 2-D matmul over all positions (tf.matmul of (B, T, D) by (D, E) would be a batch
    matmul over broadcast weights)."""
    out = tf.reshape(h, (-1, h.shape[-1])) @ w + b
    return tf.reshape(out, (*h.shape[:-1], w.shape[1]))


def gelu(m: Any) -> Any:
    # tf.nn.gelu(approximate=True) casts its constant through float32 (see suites/vit)
    return 0.5 * m * (1.0 + tf.tanh(spec.GELU_C * (m + 0.044715 * m * m * m)))


def attention(a: Any, w: Any, heads: int) -> Any:
    b, t, d = a.shape
    qkv = tf.reshape(dense(a, w, 0.0), (b, t, 3, heads, d // heads))
    q, k, v = tf.unstack(tf.transpose(qkv, (2, 0, 3, 1, 4)))  # each (B, heads, T, d_head)
    scores = tf.matmul(q, k, transpose_b=True) / math.sqrt(d // heads)
    causal = tf.linalg.band_part(tf.ones((t, t), dtype=tf.bool), -1, 0)
    weights = tf.nn.softmax(tf.where(causal, scores, -math.inf), axis=-1)
    return tf.reshape(tf.transpose(weights @ v, (0, 2, 1, 3)), (b, t, d))


def scale(q: Any) -> Any:
    """1 / sqrt(d_head) at the dtype Keras computes the scores in (float32 at least). Its
    default is computed at float32, and so is a Python float it is given (tf.cast converts it
    to a float32 tensor first): a float64 case then scales by 1 / sqrt(32) rounded to
    float32, which the precision check failed as float32 arithmetic."""
    dtype = tf.float64 if q.dtype == tf.float64 else tf.float32
    return tf.constant(1.0 / math.sqrt(q.shape[-1]), dtype=dtype)


def sdpa(a: Any, w: Any, heads: int) -> Any:
    """The same through keras.ops.dot_product_attention on (B, T, heads, d_head), with the
    scale as a tensor of the scores' dtype (``scale``)."""
    b, t, d = a.shape
    q, k, v = tf.unstack(tf.reshape(dense(a, w, 0.0), (b, t, 3, heads, d // heads)), axis=2)
    out = keras.ops.dot_product_attention(q, k, v, scale=scale(q), is_causal=True)
    return tf.reshape(out, (b, t, d))


def model(attend: Any) -> tuple[Any, Any]:
    """``(forward, loss)`` with ``attend`` as the attention."""

    def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
        tokens = data["tokens"]
        width = p["wte"].shape[1]
        h = tf.gather(p["wte"], tokens) + p["wpe"][:tokens.shape[1]]
        for i in range(spec.layers(p)):
            blk = {n: p[spec.key(i, n)] for n in spec.BLOCK_KEYS}
            a = layer_norm(h, blk["ln1_g"], blk["ln1_b"])
            h = h + dense(attend(a, blk["attn_w"], width // spec.HEAD_DIM),
                          blk["proj_w"], blk["proj_b"])
            m = dense(layer_norm(h, blk["ln2_g"], blk["ln2_b"]), blk["fc_w"], blk["fc_b"])
            h = h + dense(gelu(m), blk["fc2_w"], blk["fc2_b"])
        out = layer_norm(h, p["lnf_g"], p["lnf_b"])
        return tf.reshape(tf.reshape(out, (-1, width)) @ tf.transpose(p["wte"]),
                          (*tokens.shape, p["wte"].shape[0]))

    def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=data["targets"], logits=forward(p, data)))

    return forward, loss


forward, loss = model(attention)
build = functional.tensorflow(forward, loss, idioms={"sdpa": model(sdpa)})
