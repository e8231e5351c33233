"""Small CNN on CIFAR-shaped images: two 3x3 convolutions with ReLU and 2x2 max-pooling, a linear
head, softmax cross-entropy, heavy-ball momentum SGD.

What is compared: one momentum step (lr 0.001, mu 0.9: torch.optim.SGD, optax.sgd, Keras SGD)
of

    h = maxpool2(relu(conv3x3(x, k1) + c1))      # (B, 32, 32, 3) -> (B, 16, 16, C1)
    h = maxpool2(relu(conv3x3(h, k2) + c2))      # -> (B, 8, 8, C2)
    logits = flatten(h) @ w + b                  # flattened in (row, column, channel) order
    loss = mean over the batch of -sum(y * log_softmax(logits))       # y one-hot

on synthetic NHWC images N(0, 1), each framework with its own convolution and pooling ops:
lax.conv_general_dilated and lax.reduce_window, F.conv2d and F.max_pool2d (NCHW: the kernels
are held as (out, in, h, w), the head's rows in (channel, row, column) order, both laid out at
build), tf.nn.conv2d and tf.nn.max_pool2d. Convolutions are 'SAME' (zero padding of 1), stride 1.

The reference is only the forward below, in the Python array API: a convolution as the sum of
nine shifted slices times the kernel's taps, padding by concatenating zeros, pooling by a
reshape and a max. Its gradient comes from the float64 autodiff oracle, checked against finite
differences. ReLU and max-pooling make the loss piecewise smooth; the verdicts do not depend
on the seed (a window's tie is among ReLU zeros, whose gradient is zero whichever wins).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from pytest_mlbench import Arrays, Shape, Tolerance, Tolerances, Workload, momentum, train


def make_data(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    b, s, k = dims["batch"], dims["image"], dims["classes"]
    labels = rng.integers(0, k, size=b)
    return {"x": rng.standard_normal((b, s, s, dims["channels"])), "y": np.eye(k)[labels]}


def make_params(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    """Kernels (h, w, in, out) N(0, 2 / fan_in) (He), the head N(0, 1 / fan_in), biases
    0.1 N(0, 1) (away from 0: a dropped bias fails the gradient check)."""
    c, c1, c2, k = dims["channels"], dims["c1"], dims["c2"], dims["classes"]
    flat = (dims["image"] // 4) ** 2 * c2

    def normal(scale: float, *shape: int) -> np.ndarray:
        return scale * rng.standard_normal(shape)

    return {"k1": normal(math.sqrt(2 / (9 * c)), 3, 3, c, c1), "c1": normal(0.1, c1),
            "k2": normal(math.sqrt(2 / (9 * c1)), 3, 3, c1, c2), "c2": normal(0.1, c2),
            "w": normal(math.sqrt(1 / flat), flat, k), "b": normal(0.1, k)}


# -- the reference, in the Python array API (xp: numpy, jax.numpy or torch) -------------------

def pad(xp: Any, x: Any) -> Any:
    """Zero padding of one row and one column on every side of (B, H, W, C)."""
    b, h, w, c = x.shape
    rows = xp.zeros((b, 1, w, c), dtype=x.dtype)
    x = xp.concat([rows, x, rows], axis=1)
    cols = xp.zeros((b, h + 2, 1, c), dtype=x.dtype)
    return xp.concat([cols, x, cols], axis=2)


def conv3x3(xp: Any, x: Any, k: Any, bias: Any) -> Any:
    """'SAME' convolution (cross-correlation, as every framework's conv): the sum over the
    kernel's nine taps of the shifted input times that tap's (in, out) matrix."""
    h, w = x.shape[1], x.shape[2]
    padded = pad(xp, x)
    out = bias
    for i in range(3):
        for j in range(3):
            out = out + padded[:, i:i + h, j:j + w, :] @ k[i, j, ...]
    return out


def maxpool2(xp: Any, x: Any) -> Any:
    b, h, w, c = x.shape
    return xp.max(xp.reshape(x, (b, h // 2, 2, w // 2, 2, c)), axis=(2, 4))


def forward(xp: Any, p: Mapping[str, Any], d: Mapping[str, Any]) -> Any:
    relu = lambda v: xp.maximum(v, xp.zeros_like(v))  # noqa: E731
    h = maxpool2(xp, relu(conv3x3(xp, d["x"], p["k1"], p["c1"])))
    h = maxpool2(xp, relu(conv3x3(xp, h, p["k2"], p["c2"])))
    return xp.reshape(h, (h.shape[0], -1)) @ p["w"] + p["b"]


def objective(xp: Any, logits: Any, d: Mapping[str, Any]) -> Any:
    shifted = logits - xp.max(logits, axis=-1, keepdims=True)
    log_probs = shifted - xp.log(xp.sum(xp.exp(shifted), axis=-1, keepdims=True))
    return -xp.mean(xp.sum(d["y"] * log_probs, axis=-1))


def flops(dims: Mapping[str, int]) -> int:
    """Convolution and matmul FLOPs of the direct algorithm, 2 B H W 9 C_in C_out a
    convolution: forward, then the kernels' and the inputs' gradients, except the first
    convolution's input gradient (the images need none). Pooling and ReLU left out."""
    b, s, k = dims["batch"], dims["image"], dims["classes"]
    conv1 = 2 * b * s * s * 9 * dims["channels"] * dims["c1"]
    conv2 = 2 * b * (s // 2) ** 2 * 9 * dims["c1"] * dims["c2"]
    head = 2 * b * (s // 4) ** 2 * dims["c2"] * k
    return 2 * conv1 + 3 * (conv2 + head)


def size(batch: int, c1: int, c2: int) -> dict[str, int]:
    return {"batch": batch, "image": 32, "channels": 3, "c1": c1, "c2": c2, "classes": 10}


SPEC = Workload(
    name="cnn",
    summary=__doc__.splitlines()[0],
    sizes={
        "smoke": (Shape(size(batch=8, c1=8, c2=16)),),
        # about 1 GFLOP a step
        "default": (Shape(size(batch=32, c1=32, c2=64)),),
        # the first two stages of the TensorFlow CIFAR-10 tutorial's CNN, its batch of 128
        "paper": (Shape(size(batch=128, c1=32, c2=64), "b128", rounds=20),),
    },
    tasks=(train(momentum(1e-3, 0.9)),),
    # fp32 trajectories of a ReLU / max-pool network drift from float64 faster than a smooth
    # model's: each step's rounding moves a few pre-activations across zero and a few pooling
    # winners, and momentum accumulates it. Measured on torch's oneDNN convolutions at the
    # default size: the momentum buffer 20 steps from the start within 0.2% of float64 in norm
    # (the table allows 0.1%). 0.5% still fails a parameter one step behind at the 128 steps
    # the audit replays from the start (0.8%), and any wrong hyper-parameter. Swept as the
    # audit judges it (tools/tolerance_sweep.py --check trajectory, 7 implementations, seeds
    # 0-9, every 10 steps to 130): 980 points, the largest at 0.29 of this tolerance.
    # The gradient, too, is judged per point, and at a point where rounding puts a
    # pre-activation or a pooling pair across its kink, one term of it moves: in
    # tools/tolerance_sweep.py (7 implementations, seeds 0-14, every 20 steps to 300), 51 of
    # 1680 points went over the fp32 table's (1e-4, 1e-5), up to 32 times; at (3e-3, 3e-3)
    # none did, the largest at 0.30 of it. Label smoothing 0.1 still fails (tests/cheats/
    # smoothing); the check now resolves about 0.6% of a gradient's norm at the start.
    # Under amp the convolutions' outputs are rounded to bfloat16, 256 values an octave, so
    # two values of a 2x2 pooling window tie far more often than at float32 and the gradient
    # takes the other one: 6-11% of the first kernel's gradient norm at the start, at the
    # smoke and default sizes, in every framework; after training, JAX's first bias gradient
    # (a sum over every position, which XLA:CPU accumulates in bfloat16) 21% (2026-11-26),
    # where depth 3 gives the table's 4%.
    # Under tf32 (GPUs) the convolutions' inputs are rounded to 10 bits of mantissa: ties are
    # rarer than at bfloat16, but one that flips moves the gradient as far, so tf32 takes
    # bf16's table: on an H200 (2026-11-26) every implementation, torch's cuDNN and JAX's
    # alike, gave k1's gradient 5.2% off in norm at the smoke start (one element -0.0065
    # against -0.0355), where tf32's table allows 2%.
    tolerances={"fp32": Tolerances(grad=Tolerance(3e-3, 3e-3),
                                   trajectory=Tolerance(5e-3, 1e-4)),
                "tf32": Tolerances(grad=Tolerance(6e-2, 6e-2),  # bf16's table
                                   trajectory=Tolerance(1.5e-1, 1.5e-1)),
                "amp": Tolerances(grad=Tolerance(0.25, 0.25), trajectory=Tolerance(0.3, 0.3)),
                # float16 compute flips the same ties, less often (10 bits of mantissa, as
                # tf32): at the smoke start (2026-11-26, CPU) c1's gradient was 2.6% off in
                # norm in torch, 2.9% in TensorFlow and 2.8-3.2% in JAX, k1's 5.1% in torch's
                # autocast alone, where the depth rule allows 1%; this allows 10%
                "amp16": Tolerances(grad=Tolerance(0.05, 0.05),
                                    trajectory=Tolerance(0.05, 0.05))},
    make_data=make_data,
    make_params=make_params,
    forward=forward,
    objective=objective,
    flops_per_step=flops,
    depth=3,  # two convolutions and the dense head
    # +cl: torch's kernels in channels_last memory format (JAX and TensorFlow convolve NHWC
    # already); +flax, +keras: the model as a Flax Linen module, as Keras layers (docs/IDIOMS.md)
    implementations={
        "jax": ("eager", "jit", "jit+flax", "jit+donate"),
        "torch": ("eager", "jit", "eager+cl", "jit+cl"),
        "tensorflow": ("eager", "jit", "xla", "jit+keras"),
    },
)
