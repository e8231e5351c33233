"""ViT in TensorFlow: ``forward(params, data)`` on the spec's model tree (spec.to_model); the
builder keeps it in tf.Variables and steps it with a Keras optimizer, eager, under tf.function
or tf.function(jit_compile=True) (XLA). Attention written out, or through
keras.ops.dot_product_attention (variant xla+sdpa). Variant xla+keras is the same model as
Keras 3 layers (Dense patch embedding, LayerNormalization, MultiHeadAttention, Dense MLP,
GlobalAveragePooling1D, Dense head), each called on the spec's weights through
``stateless_call`` (MultiHeadAttention's kernels and biases are reshaped views of qkv_w,
qkv_b and proj_w; the layers' own initial weights are never used)."""

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


def objective(forward: Any) -> Any:
    """The mean softmax cross-entropy of ``forward``'s logits against the one-hot labels."""

    def loss(params: dict[str, Any], data: dict[str, Any]) -> Any:
        log_probs = tf.nn.log_softmax(forward(params, data))
        return -tf.reduce_mean(tf.reduce_sum(data["y"] * log_probs, axis=-1))

    return loss


def model(attend: Any) -> tuple[Any, Any]:
    """``(forward, loss)`` with ``attend`` as the attention."""

    def forward(params: dict[str, Any], data: dict[str, Any]) -> Any:
        x = data["x"]
        return logits(params, x, *spec.config(params["patch_w"].shape, x.shape), attend)

    return forward, objective(forward)


# -- the model as Keras layers (variant xla+keras) -------------------------------------------

_LAYERS: dict[tuple[Any, ...], dict[str, keras.layers.Layer]] = {}


def layers(params: dict[str, Any], tokens: int, heads: int) -> dict[str, keras.layers.Layer]:
    """The Keras layers for these shapes and dtype (the policy's compute dtype: the builder
    casts the weights to it under amp, as Keras's mixed_bfloat16 layers cast theirs), made
    and built once, outside any trace (tf.init_scope): a layer builds variables of its own,
    which a tf.function may not create on a later trace. The layers are functions of the
    weights they are given, so one of each kind serves every block. At bfloat16 (bf16, amp)
    Keras normalises and averages at float32 and, in MultiHeadAttention (no dropout, no
    scores returned: keras.ops.dot_product_attention inside), takes the scores and softmax
    at float32, as variant xla+sdpa does; the plain code does them at bfloat16."""
    (flat_patch, d), mlp = params["patch_w"].shape, params["blocks"][0]["fc1_w"].shape[1]
    classes, dtype = params["head_w"].shape[1], params["patch_w"].dtype.name
    key = (flat_patch, d, mlp, classes, tokens, heads, dtype)
    if key not in _LAYERS:
        with tf.init_scope():
            made = {"patch": keras.layers.Dense(d, dtype=dtype),
                    "ln": keras.layers.LayerNormalization(epsilon=spec.LN_EPS, dtype=dtype),
                    # use_bias: qkv_b and proj_b are the four projections' biases
                    "attn": keras.layers.MultiHeadAttention(
                        num_heads=heads, key_dim=d // heads, use_bias=True, dtype=dtype),
                    # the spec's tanh GELU written out (``gelu``): keras.activations.gelu is
                    # tf.nn.gelu, whose 0.044715 goes through float32 (1e-9 off at fp64)
                    "fc1": keras.layers.Dense(mlp, activation=gelu, dtype=dtype),
                    "fc2": keras.layers.Dense(d, dtype=dtype),
                    "pool": keras.layers.GlobalAveragePooling1D(dtype=dtype),
                    "head": keras.layers.Dense(classes, dtype=dtype)}
            made["patch"].build((None, tokens, flat_patch))
            made["ln"].build((None, tokens, d))
            made["attn"].build((None, tokens, d), (None, tokens, d))
            made["fc1"].build((None, tokens, d))
            made["fc2"].build((None, tokens, mlp))
            made["pool"].build((None, tokens, d))
            made["head"].build((None, d))
            # MultiHeadAttention scales the query by its _inverse_sqrt_key_dim, a Python float
            # that Keras's tf.cast turns into a float32 tensor before the scores' dtype: at
            # fp64, 1 / sqrt(16) is exact in float32, but the same constant as a NumPy float64
            # (cast from float64, once, to the scores' dtype) is right for any head width
            # (suites/gpt/impl_tensorflow.py: 1 / sqrt(32) failed gpt's precision check)
            made["attn"]._inverse_sqrt_key_dim = np.float64(1.0 / math.sqrt(d // heads))
        _LAYERS[key] = made
    return _LAYERS[key]


def mha_weights(blk: dict[str, Any], heads: int) -> list[Any]:
    """MultiHeadAttention's weights in its ``trainable_variables`` order: the query, key and
    value kernels (d, heads, d_head) and biases (heads, d_head), column slices [q | k | v] of
    qkv_w and qkv_b, each head owning d_head consecutive columns; the output kernel (heads,
    d_head, d), proj_w's rows by head, and bias proj_b."""
    d = blk["qkv_w"].shape[0]
    kernels = tf.unstack(tf.reshape(blk["qkv_w"], (d, 3, heads, d // heads)), axis=1)
    biases = tf.unstack(tf.reshape(blk["qkv_b"], (3, heads, d // heads)))
    return [kernels[0], biases[0], kernels[1], biases[1], kernels[2], biases[2],
            tf.reshape(blk["proj_w"], (heads, d // heads, d)), blk["proj_b"]]


def keras_forward(params: dict[str, Any], data: dict[str, Any]) -> Any:
    x = data["x"]
    patch, heads = spec.config(params["patch_w"].shape, x.shape)
    patches = patchify(x, patch)
    made = layers(params, patches.shape[1], heads)

    def norm(h: Any, g: Any, b: Any) -> Any:
        return made["ln"].stateless_call([g, b], [], h)[0]

    h = made["patch"].stateless_call([params["patch_w"], params["patch_b"]], [], patches)[0] \
        + params["pos"]
    for blk in params["blocks"]:
        a = norm(h, blk["ln1_g"], blk["ln1_b"])
        h = h + made["attn"].stateless_call(mha_weights(blk, heads), [], a, a)[0]
        m, _ = made["fc1"].stateless_call([blk["fc1_w"], blk["fc1_b"]], [],
                                          norm(h, blk["ln2_g"], blk["ln2_b"]))
        h = h + made["fc2"].stateless_call([blk["fc2_w"], blk["fc2_b"]], [], m)[0]
    pooled, _ = made["pool"].stateless_call([], [], norm(h, params["ln_g"], params["ln_b"]))
    return made["head"].stateless_call([params["head_w"], params["head_b"]], [], pooled)[0]


forward, loss = model(attention)
build = functional.tensorflow(forward, loss, to_model=spec.to_model, from_model=spec.from_model,
                              idioms={"sdpa": model(sdpa),
                                      "keras": (keras_forward, objective(keras_forward))})
