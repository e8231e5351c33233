from __future__ import annotations

from pathlib import Path
from typing import Any

import jax.numpy as jnp

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
forward, _ = MODELS.jax_model()


def summed(p: Any, d: Any) -> Any:
    return jnp.sum(forward(p, d))


build = functional.jax(forward, summed)
