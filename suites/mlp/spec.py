"""The seed MLP (MLPDialects): 128 -> tanh(128) -> sigmoid(1), no biases, mean binary
cross-entropy, plain SGD at lr 1e-2, weights 0.01 * N(0, 1), inputs N(0, 1), labels 0/1."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pytest_mlbench import Arrays, Shape, Workload

IN, HIDDEN = 128, 128


def make_data(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    batch = dims["batch"]
    return {"x": rng.standard_normal((batch, IN)),
            "y": rng.integers(0, 2, size=(batch, 1)).astype(np.float64)}


def make_params(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    return {"w1": 0.01 * rng.standard_normal((IN, HIDDEN)),
            "w2": 0.01 * rng.standard_normal((HIDDEN, 1))}


def loss(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> float:
    """Mean BCE on logits z: softplus(z) - y z, which is -y log s(z) - (1-y) log(1-s(z))."""
    z = np.tanh(d["x"] @ p["w1"]) @ p["w2"]
    return np.mean(np.logaddexp(0, z) - d["y"] * z)


def grad(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> Arrays:
    """Hand-derived: dL/dz = (sigmoid(z) - y) / batch, back through w2, tanh and w1."""
    h = np.tanh(d["x"] @ p["w1"])
    z = h @ p["w2"]
    dz = (0.5 * (1 + np.tanh(z / 2)) - d["y"]) / len(z)
    dh = (dz @ p["w2"].T) * (1 - h * h)
    return {"w1": d["x"].T @ dh, "w2": h.T @ dz}


def flops(dims: Mapping[str, int]) -> int:
    """Matmul FLOPs: forward 2BDH + 2BH, backward 2BH (w2) + 2BH (hidden) + 2BDH (w1)."""
    b = dims["batch"]
    return 4 * b * IN * HIDDEN + 6 * b * HIDDEN


SPEC = Workload(
    name="mlp",
    summary=__doc__.splitlines()[0],
    sizes={
        "smoke": (Shape({"batch": 64}),),
        "default": (Shape({"batch": 1024}, steps_per_call=10),),
        "paper": (Shape({"batch": 1024}, "b1024", steps_per_call=10_000, rounds=3),
                  Shape({"batch": 4096}, "b4096", steps_per_call=10_000, rounds=3)),
    },
    learning_rate=1e-2,
    make_data=make_data,
    make_params=make_params,
    loss=loss,
    grad=grad,
    flops_per_step=flops,
    depth=2,  # two matmuls
    # parallel cases (--mlbench-workers above 1, docs/DISTRIBUTED.md): JAX over a Mesh,
    # torch DDP, FSDP2 and DTensor; Megatron's MLP split: w1 by columns, w2 by rows
    # torch's dp also compiled (torch.compile around the DDP model)
    parallel={"dp": {"jax": "jit", "torch": ("eager", "jit"), "tensorflow": "jit"},
              **{s: {"jax": "jit", "torch": "eager", "tensorflow": "jit"} for s in ("fsdp", "tp")}},
    tensor_parallel={"w1": 1, "w2": 0},
    implementations={
        "numpy": ("eager",),
        "numba": ("jit",),
        "autograd": ("eager",),
        "jax": ("eager", "jit", "jit+donate"),
        "torch": ("eager", "jit"),
        "tensorflow": ("eager", "jit", "xla"),
    },
)
