from __future__ import annotations

from pathlib import Path
from typing import Any

import jax.numpy as jnp

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")


class Ones(MODELS.Wrapped):  # type: ignore[misc,name-defined]
    def apply(self, probe: Any) -> Any:
        return self.inner.apply({"u": jnp.ones_like(probe["u"])})


def build(case: Any) -> Any:
    return Ones(functional.jax(*MODELS.jax_model())(case))
