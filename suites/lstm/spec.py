"""LSTM sequence classifier, one SGD step: the LSTM equations written out (same gate order and
fused gate matmul everywhere), unrolled over the sequence, a linear head on the last state.

What is compared: one plain SGD step (lr 0.1; torch.optim.SGD, optax.sgd, Keras SGD, and the
spec's update in Autograd) of

    xw = x @ wx + b                                  # every step's input projection at once
    for t in 0..T-1:                                 # h and c start at zero
        z = xw[:, t] + h @ wh       (t = 0: xw[:, 0]; h is zero)
        i, f, g, o = sigmoid(z[:H]), sigmoid(z[H:2H]), tanh(z[2H:3H]), sigmoid(z[3H:])
        c = f c + i g;   h = o tanh(c)
    logits = h @ wo + bo;  loss = mean over the batch of -sum(y * log_softmax(logits))

The cell is written in each framework's ops with a Python loop over time (unrolled under jit,
tf.function and torch.compile): the plain variants compare autodiff frameworks on one
program. The idioms beside them (docs/IDIOMS.md) are each framework's own loop or kernel:
lax.scan, tf.scan, and torch's LSTM kernel (torch.lstm, behind torch.nn.LSTM, on the spec's
weights: same gate order, its second bias a constant zero). Gate order i, f, g, o (torch's);
wx (I, 4H), wh (H, 4H). Data: sequences N(0, 1) with random one-hot classes. The reference
is only the forward below in the Python array API; gradients come from the float64 oracle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from pytest_mlbench import Arrays, Shape, Workload, sgd, train


def make_data(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    b, k = dims["batch"], dims["classes"]
    labels = rng.integers(0, k, size=b)
    return {"x": rng.standard_normal((b, dims["seq"], dims["in"])), "y": np.eye(k)[labels]}


def make_params(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    """Weights N(0, 1 / fan_in); biases 0.1 N(0, 1), the forget gate's shifted by +1."""
    n_in, h, k = dims["in"], dims["hidden"], dims["classes"]
    b = 0.1 * rng.standard_normal(4 * h)
    b[h:2 * h] += 1.0
    return {"wx": rng.standard_normal((n_in, 4 * h)) / math.sqrt(n_in),
            "wh": rng.standard_normal((h, 4 * h)) / math.sqrt(h), "b": b,
            "wo": rng.standard_normal((h, k)) / math.sqrt(h), "bo": 0.1 * rng.standard_normal(k)}


# -- the reference, in the Python array API -------------------------------------------------

def sigmoid(xp: Any, z: Any) -> Any:
    return 1.0 / (1.0 + xp.exp(-z))


def forward(xp: Any, p: Mapping[str, Any], d: Mapping[str, Any]) -> Any:
    x = d["x"]
    b, steps, n_in = x.shape
    hidden = p["wh"].shape[0]
    xw = xp.reshape(xp.reshape(x, (b * steps, n_in)) @ p["wx"] + p["b"], (b, steps, 4 * hidden))
    h = c = None
    for t in range(steps):
        z = xw[:, t, :] if h is None else xw[:, t, :] + h @ p["wh"]
        i, f = sigmoid(xp, z[:, :hidden]), sigmoid(xp, z[:, hidden:2 * hidden])
        g, o = xp.tanh(z[:, 2 * hidden:3 * hidden]), sigmoid(xp, z[:, 3 * hidden:])
        c = i * g if c is None else f * c + i * g
        h = o * xp.tanh(c)
    return h @ p["wo"] + p["bo"]


def objective(xp: Any, logits: Any, d: Mapping[str, Any]) -> Any:
    shifted = logits - xp.max(logits, axis=-1, keepdims=True)
    log_probs = shifted - xp.log(xp.sum(xp.exp(shifted), axis=-1, keepdims=True))
    return -xp.mean(xp.sum(d["y"] * log_probs, axis=-1))


def flops(dims: Mapping[str, int]) -> int:
    """Matmul FLOPs: the input projection 8 B T I H (forward, then its weight gradient: the
    data need none), the recurrence 8 B (T-1) H^2 (step 0 has no h @ wh) three times (forward,
    the state's and the weight's gradients), the head 2 B H K three times."""
    b, t, n_in, h = dims["batch"], dims["seq"], dims["in"], dims["hidden"]
    return 2 * 8 * b * t * n_in * h + 3 * 8 * b * (t - 1) * h * h \
        + 3 * 2 * b * h * dims["classes"]


def size(batch: int, seq: int, n_in: int, hidden: int) -> dict[str, int]:
    return {"batch": batch, "seq": seq, "in": n_in, "hidden": hidden, "classes": 10}


SPEC = Workload(
    name="lstm",
    summary=__doc__.splitlines()[0],
    sizes={
        "smoke": (Shape(size(batch=4, seq=4, n_in=8, hidden=16)),),
        # 32 sequences of 32 steps, 128 units: about 0.5 GFLOP in 32 dependent steps
        "default": (Shape(size(batch=32, seq=32, n_in=32, hidden=128)),),
        # the LSTM of Zaremba et al.'s medium Penn Treebank model (650 units, 35 steps, batch
        # 20, one layer), classifying each sequence
        "paper": (Shape(size(batch=20, seq=35, n_in=650, hidden=650), "ptb_medium",
                        rounds=20),),
    },
    tasks=(train(sgd(0.1)),),
    make_data=make_data,
    make_params=make_params,
    forward=forward,
    objective=objective,
    flops_per_step=flops,
    depth=lambda d: d["seq"] + 1,  # a gate matmul a step, then the head
    # +scan: the loop over time as the framework's own loop construct (lax.scan, tf.scan's
    # while loop) instead of unrolled steps; +nnlstm: torch's LSTM kernel (docs/IDIOMS.md)
    implementations={
        "autograd": ("eager",),
        "jax": ("eager", "jit", "jit+scan", "jit+donate"),
        "torch": ("eager", "jit", "eager+nnlstm"),
        "tensorflow": ("eager", "jit", "xla", "jit+scan", "xla+scan"),
    },
)
