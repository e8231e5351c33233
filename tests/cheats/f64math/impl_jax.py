"""JAX without x64: the loss and gradient computed in NumPy float64 on the jax arrays' values,
handed back as float32 jax arrays (jax's own float64 would need x64, which the policy checks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

F64 = load_suite_file(Path(__file__).parent / "impl_numpy.py")


def value_and_grad(p: dict[str, Any], d: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    loss, g = F64.value_and_grad({k: np.asarray(v) for k, v in p.items()},
                                 {k: np.asarray(v) for k, v in d.items()})
    return jnp.asarray(loss), {k: jnp.asarray(v) for k, v in g.items()}


build = functional.jax(value_and_grad=value_and_grad)
