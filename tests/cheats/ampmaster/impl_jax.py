"""The honest mlp model, its parameters held at bfloat16 (optax's state follows them)."""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

HONEST = load_suite_file(Path(__file__).parents[1] / "specs.py").honest("mlp", "jax")

build = functional.jax(HONEST.forward, HONEST.loss,
                       to_model=lambda p: {k: v.astype(jnp.bfloat16) for k, v in p.items()},
                       from_model=dict)
