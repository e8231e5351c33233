"""Lower matmul precision for each step after the checked ones, through JAX's own context
manager: the global setting never changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax

from pytest_mlbench import load_suite_file

CHEATS = Path(__file__).parents[1]
SPECS = load_suite_file(CHEATS / "specs.py")
HONEST = load_suite_file(CHEATS / "honest" / "impl_jax.py")


def lowered(inner: Any, n: int) -> Any:
    with jax.default_matmul_precision("bfloat16"):
        return inner.step()


def build(case: Any) -> Any:
    return SPECS.AfterChecks(HONEST.build(case), lowered)
