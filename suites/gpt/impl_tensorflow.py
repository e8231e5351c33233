"""The GPT in TensorFlow: tf.gather for the embeddings, causal attention written out (variants
eager, jit, xla) or through keras.ops.dot_product_attention (variant xla+sdpa: Keras's own
attention op, softmax at float32 at least), tf.nn.sparse_softmax_cross_entropy_with_logits;
eager, tf.function or XLA, stepped by Keras's Adam on tf.Variables. Variant xla+keras is the
same model as Keras 3 layers (Embedding, LayerNormalization, MultiHeadAttention, Dense), each
called on the spec's weights through ``stateless_call`` (MultiHeadAttention's kernels are
reshaped views of attn_w and proj_w; the layers' own initial weights are never used)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # before keras is first imported

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from pytest_mlbench import load_suite_file  # noqa: E402
from pytest_mlbench.builders import functional  # noqa: E402

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


def objective(forward: Any) -> Any:
    """The mean next-token cross-entropy of ``forward``'s logits."""

    def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=data["targets"], logits=forward(p, data)))

    return loss


def model(attend: Any) -> tuple[Any, Any]:
    """``(forward, loss)`` with ``attend`` as the attention."""

    def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
        tokens = data["tokens"]
        width = p["wte"].shape[1]
        h = tf.gather(p["wte"], tokens) + p["wpe"][:tokens.shape[1]]
        for i in range(spec.layers(p)):
            blk = {n: p[spec.key(i, n)] for n in spec.BLOCK_KEYS}
            a = layer_norm(h, blk["ln1_g"], blk["ln1_b"])
            h = h + dense(attend(a, blk["attn_w"], spec.heads(width)),
                          blk["proj_w"], blk["proj_b"])
            m = dense(layer_norm(h, blk["ln2_g"], blk["ln2_b"]), blk["fc_w"], blk["fc_b"])
            h = h + dense(gelu(m), blk["fc2_w"], blk["fc2_b"])
        out = layer_norm(h, p["lnf_g"], p["lnf_b"])
        return tf.reshape(tf.reshape(out, (-1, width)) @ tf.transpose(p["wte"]),
                          (*tokens.shape, p["wte"].shape[0]))

    return forward, objective(forward)


# -- the model as Keras layers (variant xla+keras) -------------------------------------------

_LAYERS: dict[tuple[Any, ...], dict[str, keras.layers.Layer]] = {}


def layers(p: dict[str, Any], tokens: Any) -> dict[str, keras.layers.Layer]:
    """The Keras layers for these shapes and dtype (the policy's compute dtype: the builder
    casts the weights to it under amp, as Keras's mixed_bfloat16 layers cast theirs), made
    and built once, outside any trace (tf.init_scope): a layer builds variables of its own,
    which a tf.function may not create on a later trace. The layers are functions of the
    weights they are given, so one of each kind serves every block. At bfloat16 (bf16, amp)
    Keras normalises at float32 and, in MultiHeadAttention (no dropout, no scores returned:
    keras.ops.dot_product_attention inside), takes the scores and softmax at float32, as
    variant xla+sdpa does; the plain code does both at bfloat16."""
    (vocab, d), t = p["wte"].shape, tokens.shape[1]
    key = (vocab, d, t, p["wte"].dtype.name)
    if key not in _LAYERS:
        dtype = key[-1]
        with tf.init_scope():
            made = {"wte": keras.layers.Embedding(vocab, d, dtype=dtype),
                    "ln": keras.layers.LayerNormalization(epsilon=spec.LN_EPS, dtype=dtype),
                    # no bias: the spec's q, k and v have none (see mha_weights for proj_b)
                    "attn": keras.layers.MultiHeadAttention(
                        num_heads=spec.heads(d), key_dim=spec.head_dim(d), use_bias=False,
                        dtype=dtype),
                    # the spec's tanh GELU written out (``gelu``): keras.activations.gelu is
                    # tf.nn.gelu, whose 0.044715 goes through float32 (1e-9 off at fp64 on
                    # N(0, 1) inputs; the smoke size's small MLP inputs hide it from the
                    # precision check, which is no reason to keep float32 arithmetic)
                    "fc": keras.layers.Dense(4 * d, activation=gelu, dtype=dtype),
                    "fc2": keras.layers.Dense(d, dtype=dtype)}
            made["wte"].build((None, t))
            made["ln"].build((None, t, d))
            made["attn"].build((None, t, d), (None, t, d))
            made["fc"].build((None, t, d))
            made["fc2"].build((None, t, 4 * d))
            # MultiHeadAttention scales the query by its _inverse_sqrt_key_dim, a Python float
            # that Keras's tf.cast turns into a float32 tensor before the scores' dtype: at
            # fp64, 1 / sqrt(32) rounded to float32 (as keras.ops.dot_product_attention's
            # default, ``scale`` above). The same constant as a NumPy float64 is cast from
            # float64, once, to the scores' dtype (float32 at least).
            made["attn"]._inverse_sqrt_key_dim = np.float64(1.0 / math.sqrt(spec.head_dim(d)))
        _LAYERS[key] = made
    return _LAYERS[key]


def mha_weights(attn_w: Any, proj_w: Any, heads: int) -> list[Any]:
    """MultiHeadAttention's weights in its ``trainable_variables`` order: the query, key and
    value kernels (d, heads, d_head), column slices [q | k | v] of attn_w, each head owning
    d_head consecutive columns; the output kernel (heads, d_head, d), proj_w's rows by head.
    No biases: Keras's use_bias covers all four projections, the spec has one on the output
    only, so proj_b is added after the layer (a zero q/k/v bias would be a parameter the
    spec lacks, and a key bias's gradient is exactly zero: spec.py)."""
    d = attn_w.shape[0]
    q, k, v = tf.unstack(tf.reshape(attn_w, (d, 3, heads, d // heads)), axis=1)
    return [q, k, v, tf.reshape(proj_w, (heads, d // heads, d))]


def keras_forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    tokens = data["tokens"]
    (vocab, width), t = p["wte"].shape, tokens.shape[1]
    made = layers(p, tokens)

    def norm(h: Any, g: Any, b: Any) -> Any:
        return made["ln"].stateless_call([g, b], [], h)[0]

    # positions: the first t rows of wpe, as keras_hub's PositionEmbedding slices its table
    # (a second Embedding looked up at range(t) hands wpe's gradient back as tf.IndexedSlices,
    # which the builder's gradient report refuses; wte's is dense because the tied head adds
    # a dense one)
    h = made["wte"].stateless_call([p["wte"]], [], tokens)[0] + p["wpe"][:t]
    for i in range(spec.layers(p)):
        blk = {n: p[spec.key(i, n)] for n in spec.BLOCK_KEYS}
        a = norm(h, blk["ln1_g"], blk["ln1_b"])
        attended, _ = made["attn"].stateless_call(
            mha_weights(blk["attn_w"], blk["proj_w"], spec.heads(width)), [], a, a,
            use_causal_mask=True)
        h = h + attended + blk["proj_b"]
        m, _ = made["fc"].stateless_call([blk["fc_w"], blk["fc_b"]], [],
                                         norm(h, blk["ln2_g"], blk["ln2_b"]))
        h = h + made["fc2"].stateless_call([blk["fc2_w"], blk["fc2_b"]], [], m)[0]
    out = norm(h, p["lnf_g"], p["lnf_b"])
    # the head tied to the token embedding: logits = h @ wte^T, the same weight (Keras's
    # Embedding has no reverse call), one 2-D matmul as in ``model``
    return tf.reshape(tf.reshape(out, (-1, width)) @ tf.transpose(p["wte"]),
                      (*tokens.shape, vocab))


forward, loss = model(attention)
build = functional.tensorflow(forward, loss, idioms={
    "sdpa": model(sdpa), "keras": (keras_forward, objective(keras_forward))})
