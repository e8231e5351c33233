"""suites/mlp_layers's Flax Dense layers with an extra zero-initialised bias in the first layer,
trained by Optax and never reported by params()."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "specs.py").honest("mlp_layers", "jax")


def make_model(hidden: int, n_out: int, dtype: Any, compute: Any = None) -> nn.Sequential:
    honest = HONEST.make_model(hidden, n_out, dtype, compute)
    first = honest.layers[0].clone(use_bias=True)
    return nn.Sequential([first, *honest.layers[1:]])


def to_variables(p: dict[str, Any]) -> dict[str, Any]:
    variables = HONEST.to_variables(p)
    variables["params"]["layers_0"]["bias"] = jnp.zeros(p["w1"].shape[1], p["w1"].dtype)
    return variables


class Trainer(HONEST.Trainer):  # type: ignore[misc, name-defined]
    make_model, to_variables = staticmethod(make_model), staticmethod(to_variables)


def build(case: Any) -> Trainer:
    return Trainer(case)
