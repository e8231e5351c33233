"""A hand-derived reference gradient that is wrong (w2's doubled): finite differences of its
own loss say so before any implementation is compared with it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")


def wrong_grad(p: dict, d: dict) -> dict:
    g = SPECS.mlp_grad(p, d)
    return {"w1": g["w1"], "w2": 2 * g["w2"]}


SPEC = replace(SPECS.mlp("bugref", numpy=("eager",)), grad=wrong_grad)
