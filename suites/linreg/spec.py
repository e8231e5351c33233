"""Linear regression by full-batch gradient descent (the "Python compiler comparison"): y = X w
+ b + noise, mean squared error, a fixed number of steps, no early stop, swept over dimension."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pytest_mlbench import Arrays, Shape, Workload

DIMS = (2, 5, 10, 20, 50, 100)
SAMPLES = 10_000
NOISE = 0.1


MAIN_DIM = 100  # the sweep's point in the main job (-m mlbench_main); the others run when asked


def sweep(samples: int, dims: tuple[int, ...], steps_per_call: int,
          rounds: int | None = None) -> tuple[Shape, ...]:
    """One Shape per feature dimension, labelled ``d<dim>`` so ids plot as time against d."""
    return tuple(Shape({"n": samples, "d": d}, f"d{d}", steps_per_call, rounds,
                       main=d == MAIN_DIM) for d in dims)


def make_data(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    """Features N(0, 1), true weights and bias N(0, 1), targets with N(0, NOISE^2) noise."""
    n, d = dims["n"], dims["d"]
    x = rng.standard_normal((n, d))
    w_true, b_true = rng.standard_normal((d, 1)), rng.standard_normal()
    return {"x": x, "y": x @ w_true + b_true + NOISE * rng.standard_normal((n, 1))}


def make_params(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    # A small random start rather than zeros, so a transposed or mis-indexed w shows up.
    return {"w": 0.01 * rng.standard_normal((dims["d"], 1)), "b": 0.01 * rng.standard_normal(1)}


def loss(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> float:
    """Mean squared error of the linear model, no 1/2 factor."""
    r = d["x"] @ p["w"] + p["b"] - d["y"]
    return np.mean(r * r)


def grad(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> Arrays:
    """dL/dw = 2/n X^T r and dL/db = 2/n sum(r), with r the residual."""
    r = d["x"] @ p["w"] + p["b"] - d["y"]
    scale = 2 / len(r)
    return {"w": scale * (d["x"].T @ r), "b": scale * r.sum(axis=0)}


def flops(dims: Mapping[str, int]) -> int:
    """Forward X w (2nd) and backward X^T r (2nd), plus about 6n elementwise operations."""
    n, d = dims["n"], dims["d"]
    return 4 * n * d + 6 * n


SPEC = Workload(
    name="linreg",
    summary=__doc__.splitlines()[0],
    sizes={
        # Smoke: the two ends of the sweep on a tenth of the data, to keep the test line fast.
        "smoke": sweep(1_000, (2, 100), steps_per_call=10),
        # 20 steps a call amortise the sync even at d2 (~0.05 ms a step) while keeping the
        # slowest case (~10 ms a step) near pytest-benchmark's 1 s per case: 60 cases here.
        "default": sweep(SAMPLES, DIMS, steps_per_call=20),
        "paper": sweep(SAMPLES, DIMS, steps_per_call=1_000, rounds=5),
    },
    learning_rate=1e-2,
    make_data=make_data,
    make_params=make_params,
    loss=loss,
    grad=grad,
    flops_per_step=flops,
    depth=1,
    implementations={
        "numpy": ("eager",),
        "numba": ("jit",),
        "autograd": ("eager",),
        "jax": ("eager", "jit"),
        "torch": ("eager", "jit"),
        "tensorflow": ("eager", "jit", "xla"),
    },
    # The comparison was published in float64 (NumPy's default); fp32 runs when asked for.
    default_precisions=("fp64",),
)
