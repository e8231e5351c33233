"""Honest controls written apart from the suites, as ADDING_WORKLOADS.md shows: a softmax
regression in Autograd (autograd.numpy's own reductions: logsumexp, sum, mean) and NumPy (a
hand-written gradient), trained with SGD and with Adam. Their float32 gradients are float32's
usual error; none may be called part float64 (issue 57: 0.48 and 0.46 of the harness's own
float32 computation failed "too precise" before it was judged against float32 at its most
precise)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pytest_mlbench import Arrays, Shape, Workload, adam, sgd, train

SIZES = {"smoke": (Shape({"n": 64, "d": 32, "c": 10}),),
         "default": (Shape({"n": 512, "d": 64, "c": 16}),),
         "paper": (Shape({"n": 512, "d": 64, "c": 16}),)}


def make_data(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    labels = rng.integers(0, dims["c"], dims["n"])
    return {"x": rng.standard_normal((dims["n"], dims["d"])),
            "y": np.eye(dims["c"])[labels]}


def make_params(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    return {"w": 0.1 * rng.standard_normal((dims["d"], dims["c"]))}


def loss(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> float:
    z = d["x"] @ p["w"]
    z = z - z.max(axis=1, keepdims=True)
    return float(np.mean(np.log(np.exp(z).sum(axis=1)) - (d["y"] * z).sum(axis=1)))


def grad(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> Arrays:
    z = d["x"] @ p["w"]
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return {"w": d["x"].T @ (e / e.sum(axis=1, keepdims=True) - d["y"]) / len(z)}


SPEC = Workload(
    name="softmaxag", summary="softmax regression, honest Autograd and NumPy",
    sizes=SIZES, make_data=make_data, make_params=make_params, loss=loss, grad=grad,
    tasks=(train(sgd(0.5)), train(adam(1e-2))),
    flops_per_step=lambda dims: 4 * dims["n"] * dims["d"] * dims["c"],
    implementations={"autograd": ("eager",), "numpy": ("eager",)},
)
