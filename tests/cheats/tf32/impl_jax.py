"""JAX's default matmul precision lowered in build(), after the adapter checked it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "honest" / "impl_jax.py")


def build(case: Any) -> Any:
    jax.config.update("jax_default_matmul_precision", "tensorfloat32")
    return HONEST.build(case)
