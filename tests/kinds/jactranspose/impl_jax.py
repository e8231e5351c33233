from __future__ import annotations

from pathlib import Path
from typing import Any

import jax.numpy as jnp

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")


class Transposed(MODELS.Wrapped):  # type: ignore[misc,name-defined]
    def apply(self, probe: Any) -> Any:
        return jnp.swapaxes(self.inner.apply(probe), -1, -2)


def build(case: Any) -> Any:
    return Transposed(functional.jax(*MODELS.jax_model())(case))
