"""JAX without x64: the features computed in NumPy float64, handed back as a float32 array."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

F64 = load_suite_file(Path(__file__).parent / "impl_numpy.py")


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return jnp.asarray(F64.forward({k: np.asarray(v) for k, v in p.items()},
                                   {k: np.asarray(v) for k, v in data.items()}))


build = functional.jax(forward)
