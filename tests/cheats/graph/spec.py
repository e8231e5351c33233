"""Honest: a graph network whose data are not one set of rows (issue 45). Node features and
targets have N rows, the edge list E rows: a step's batch draws the nodes by their rows and
the edges by theirs (``batch_rows``), so every edge drawn is an edge of the graph, its two
ends together (resampling the edge list as node rows, reshaped, would not be)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from pytest_mlbench import Shape, Workload, load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
NODES, EDGES, FEATURES, HIDDEN = 48, 160, 8, 16
Arrays = dict[str, np.ndarray]


def make_data(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    x = rng.standard_normal((dims["nodes"], FEATURES))
    edges = rng.integers(0, dims["nodes"], (dims["edges"], 2))
    return {"x": x, "edges": edges, "y": rng.standard_normal((dims["nodes"], 1))}


def make_params(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    return {"w": rng.standard_normal((FEATURES, HIDDEN)) / np.sqrt(FEATURES),
            "v": rng.standard_normal((HIDDEN, 1)) / np.sqrt(HIDDEN)}


def forward(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """Hidden features, their segment sum over each node's incoming edges, the output."""
    h = np.tanh(d["x"] @ p["w"])
    src, dst = d["edges"][:, 0], d["edges"][:, 1]
    agg = np.zeros_like(h)
    np.add.at(agg, dst, h[src])  # the message pass: a segment sum
    return h, agg, agg @ p["v"]


def loss(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> float:
    out = forward(p, d)[2]
    return float(0.5 * np.mean((out - d["y"]) ** 2))


def grad(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> Arrays:
    h, agg, out = forward(p, d)
    r = (out - d["y"]) / len(out)
    dagg = r @ p["v"].T
    dh = np.zeros_like(h)
    np.add.at(dh, d["edges"][:, 0], dagg[d["edges"][:, 1]])  # the pass's transpose
    return {"w": d["x"].T @ (dh * (1 - h * h)), "v": agg.T @ r}


SPEC = Workload(
    name="graph", summary="a graph network: node rows and edge rows drawn apart",
    sizes=SPECS._same_sizes(Shape({"nodes": NODES, "edges": EDGES}, steps_per_call=2)),
    learning_rate=0.05, make_data=make_data, make_params=make_params, loss=loss, grad=grad,
    input_keys=("x", "edges"), batch_rows={"edges": "edges"},
    # forward and backward: the node layer's matmuls (2 x 3 x N F H) and the output's
    flops_per_step=lambda d: 6 * d["nodes"] * (FEATURES * HIDDEN + HIDDEN),
    implementations={"numpy": ("eager",)})
