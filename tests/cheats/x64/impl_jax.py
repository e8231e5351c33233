"""JAX x64 switched on after the checked steps of an fp32 case: later arrays may widen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from pytest_mlbench import load_suite_file

CHEATS = Path(__file__).parents[1]
SPECS = load_suite_file(CHEATS / "specs.py")
HONEST = load_suite_file(CHEATS / "honest" / "impl_jax.py")


def widened(inner: Any, n: int) -> Any:
    if n == 1:
        jax.config.update("jax_enable_x64", True)
        inner.p = {k: jnp.asarray(v, jnp.float64) for k, v in inner.p.items()}
    return inner.step()


def build(case: Any) -> Any:
    return SPECS.AfterChecks(HONEST.build(case), widened)
