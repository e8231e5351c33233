"""Per-example gradients (vmap), DP-SGD-style clipped step; numpy-eager is the Python loop.

Per-example gradients of a small MLP in a DP-SGD-style step: clip each example's gradient to
norm C, average, plain SGD. numpy-eager is the loop-over-examples baseline.

Model: logits = tanh(x @ w1 + b1) @ w2 + b2; per-example loss l_i = -sum(y_i * log_softmax(
logits_i)) with one-hot y. Each step computes every example's gradient g_i of l_i with respect
to all four params, scales it by c_i = min(1, C / ||g_i||) (||.|| the global 2-norm over
w1, b1, w2, b2 together), and updates p -= lr * mean_i(c_i g_i). The noise of DP-SGD is left
out: it is not differentiation work, and identical noise would need identical random streams.
The reported loss is mean_i l_i before the update.

C = clip_norm(in, hidden) sits near the median per-example norm at the seeded start, so some
examples are clipped and some are not: an implementation that skips clipping, or clips the
averaged gradient instead, fails the gradient check. Since mean_i(c_i g_i) is not the gradient
of the loss, ``reference_checks`` tells the finite-difference check what to verify instead:
per-example gradients of per-example losses, and the clipped mean as the gradient of
mean_i(c_i l_i) with every c_i held at its value at the point of the check.

Each step materialises every g_i, as vmap does; the loop baseline holds one at a time.
Implementations: jax.vmap(jax.grad), torch.func.vmap(torch.func.grad), tf.vectorized_map of a
per-example GradientTape, and the loop baseline (numpy, eager): one example at a time with a
hand-written backward pass, as a user without vmap would write it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from pytest_mlbench import Arrays, Shape, Workload

CLIP_SCALE = 0.63  # the clip norm is CLIP_SCALE * sqrt(in + hidden): see clip_norm
NAMES = ("w1", "b1", "w2", "b2")


def clip_norm(n_in: int, hidden: int) -> float:
    """The clip norm C. At the seeded start the per-example norms grow like sqrt(in + hidden)
    (||g_w1|| = ||x_i|| ||dh_i||, ||g_w2|| = ||h_i|| ||dz_i||), so this puts C near their
    median at every size; tests/unit/suites/test_vit_pex.py checks that some examples are clipped and
    some are not."""
    return CLIP_SCALE * float(np.sqrt(n_in + hidden))


def make_data(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    b, k = dims["batch"], dims["classes"]
    labels = rng.integers(0, k, size=b)
    return {"x": rng.standard_normal((b, dims["in"])), "y": np.eye(k)[labels]}


def make_params(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    """Weights N(0, 1/fan_in), biases 0.1 N(0, 1)."""
    n_in, hidden, k = dims["in"], dims["hidden"], dims["classes"]
    return {"w1": rng.standard_normal((n_in, hidden)) / np.sqrt(n_in),
            "b1": 0.1 * rng.standard_normal(hidden),
            "w2": rng.standard_normal((hidden, k)) / np.sqrt(hidden),
            "b2": 0.1 * rng.standard_normal(k)}


def _forward(p: Mapping[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = np.tanh(x @ p["w1"] + p["b1"])
    return h, h @ p["w2"] + p["b2"]


def _log_softmax(z: np.ndarray) -> np.ndarray:
    shifted = z - np.max(z, axis=-1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def example_losses(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> np.ndarray:
    """l_i for every example, shape (B,)."""
    _, z = _forward(p, d["x"])
    return -np.sum(d["y"] * _log_softmax(z), axis=-1)


def _backward(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """Hand-derived: dl_i/dz_i = softmax(z_i) - y_i, dl_i/da_i = (dz_i @ w2.T) (1 - h_i^2);
    g_i is then x_i (x) da_i, da_i, h_i (x) dz_i, dz_i for w1, b1, w2, b2."""
    h, z = _forward(p, d["x"])
    dz = np.exp(_log_softmax(z)) - d["y"]
    return h, (dz @ p["w2"].T) * (1 - h * h), dz


def grad(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> Arrays:
    """The update direction mean_i(c_i g_i), not the gradient of ``loss``. Vectorised without
    materialising any g_i: the norm of an outer product is the product of the norms."""
    x = d["x"]
    h, da, dz = _backward(p, d)
    norms = np.sqrt(_rows2(x) * _rows2(da) + _rows2(da) + _rows2(h) * _rows2(dz) + _rows2(dz))
    c = np.minimum(1.0, clip_norm(*p["w1"].shape) / norms)[:, None] / len(x)
    return {"w1": x.T @ (c * da), "b1": np.sum(c * da, axis=0),
            "w2": h.T @ (c * dz), "b2": np.sum(c * dz, axis=0)}


def _rows2(v: np.ndarray) -> np.ndarray:
    return np.sum(v * v, axis=1)


def loss(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> float:
    return float(np.mean(example_losses(p, d)))


# -- what the finite-difference check verifies instead of (loss, grad) -------------------------

CHECKED_EXAMPLES = 4  # examples whose own gradient is checked at each reference check


def example_grad(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray], i: int) -> Arrays:
    """g_i of example ``i`` alone, materialised as the definition has it."""
    one = {k: v[i:i + 1] for k, v in d.items()}
    h, da, dz = _backward(p, one)
    return {"w1": np.outer(one["x"][0], da[0]), "b1": da[0], "w2": np.outer(h[0], dz[0]),
            "b2": dz[0]}


def clip_factors(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> np.ndarray:
    """c_i = min(1, C / ||g_i||) from each materialised g_i, one example at a time (the
    definition, independent of the vectorised norms in ``grad``)."""
    norms = [np.sqrt(sum(np.sum(v * v) for v in example_grad(p, d, i).values()))
             for i in range(len(d["x"]))]
    return np.minimum(1.0, clip_norm(*p["w1"].shape) / np.array(norms))


def reference_checks(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]
                     ) -> list[tuple[str, Callable[[Mapping[str, np.ndarray]], float],
                                     Arrays | None]]:
    """(what, loss, its gradient at p) for the finite-difference check: a few examples' own
    gradients, then ``grad`` itself (None) as the gradient of mean_i(c_i l_i) with every c_i
    held at its value at p, which is what the clipped mean is."""
    checks: list[tuple[str, Callable[[Mapping[str, np.ndarray]], float], Arrays | None]] = [
        (f"example {i}", _example_loss(d, i), example_grad(p, d, i))
        for i in range(min(CHECKED_EXAMPLES, len(d["x"])))]
    c = clip_factors(p, d)
    checks.append(("the clipped mean (clip factors held fixed)",
                   lambda q: float(np.mean(c * example_losses(q, d))), None))
    return checks


def _example_loss(d: Mapping[str, np.ndarray], i: int
                  ) -> Callable[[Mapping[str, np.ndarray]], float]:
    one = {k: v[i:i + 1] for k, v in d.items()}
    return lambda q: float(example_losses(q, one)[0])


def flops(dims: Mapping[str, int]) -> int:
    """Matmul-like FLOPs of the vectorised per-example step, P = in*hidden + hidden*classes
    weights: forward 2BP, backward to the hidden layer 2B*hidden*classes, the per-example
    weight gradients as outer products BP, their norms 2BP, the clipped mean 2BP."""
    b, hidden, k = dims["batch"], dims["hidden"], dims["classes"]
    weights = dims["in"] * hidden + hidden * k
    return 7 * b * weights + 2 * b * hidden * k


def size(batch: int, n_in: int, hidden: int) -> dict[str, int]:
    return {"batch": batch, "in": n_in, "hidden": hidden, "classes": 10}


SPEC = Workload(
    name="pex",
    summary=__doc__.splitlines()[0],
    sizes={
        "smoke": (Shape(size(batch=16, n_in=16, hidden=32)),),
        "default": (Shape(size(batch=256, n_in=128, hidden=128), steps_per_call=10),),
        "paper": (Shape(size(batch=1024, n_in=256, hidden=256), "b1024", steps_per_call=100),),
    },
    learning_rate=5e-2,
    make_data=make_data,
    make_params=make_params,
    loss=loss,
    grad=grad,
    flops_per_step=flops,
    implementations={
        "numpy": ("eager",),  # the Python loop over examples
        "jax": ("eager", "jit"),
        "torch": ("eager", "jit"),
        "tensorflow": ("jit", "xla"),  # vectorized_map wraps itself in tf.function: no eager
    },
    reference_checks=reference_checks,
)
