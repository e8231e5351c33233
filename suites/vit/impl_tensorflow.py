"""ViT in TensorFlow: ``forward(params, x)`` on the spec's model tree of tf.Variables,
GradientTape, assign_sub; eager, tf.function or tf.function(jit_compile=True) (XLA)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import tensorflow as tf

from pytest_mlbench import load_suite_file

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


def forward(params: dict[str, Any], x: Any, *, patch: int, heads: int) -> Any:
    """Logits (B, classes) from the model tree (spec.to_model) and NHWC images."""
    h = dense(patchify(x, patch), params["patch_w"], params["patch_b"]) + params["pos"]
    for blk in params["blocks"]:
        h = h + attention(layer_norm(h, blk["ln1_g"], blk["ln1_b"]), blk, heads)
        a = dense(layer_norm(h, blk["ln2_g"], blk["ln2_b"]), blk["fc1_w"], blk["fc1_b"])
        h = h + dense(gelu(a), blk["fc2_w"], blk["fc2_b"])
    pooled = tf.reduce_mean(layer_norm(h, params["ln_g"], params["ln_b"]), axis=1)
    return pooled @ params["head_w"] + params["head_b"]


class Trainer:
    def __init__(self, case: Any) -> None:
        with case.adapter.device_scope():
            self.p = tf.nest.map_structure(tf.Variable, spec.to_model(case.params))
        self.x, self.y, self.lr = case.data["x"], case.data["y"], case.learning_rate
        self.patch, self.heads = case.dims["patch"], spec.num_heads(case.dims)
        self.grads = case.compile(self._loss_and_grads)
        self.sgd_step = case.compile(self._sgd_step)

    def _loss_and_grads(self, x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = forward(self.p, x, patch=self.patch, heads=self.heads)
            loss = -tf.reduce_mean(tf.reduce_sum(y * tf.nn.log_softmax(logits), axis=-1))
        return loss, tape.gradient(loss, self.p)

    def _sgd_step(self, x: Any, y: Any) -> Any:
        loss, g = self._loss_and_grads(x, y)
        tf.nest.map_structure(lambda w, gw: w.assign_sub(self.lr * gw), self.p, g)
        return loss

    def params(self) -> dict[str, Any]:
        return spec.from_model(self.p)

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        loss, g = self.grads(self.x, self.y)
        return loss, spec.from_model(g)

    def step(self) -> Any:
        return self.sgd_step(self.x, self.y)


def build(case: Any) -> Trainer:
    return Trainer(case)
