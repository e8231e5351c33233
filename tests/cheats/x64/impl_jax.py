"""JAX x64 switched on after the checked steps of an fp32 case: later arrays may widen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "honest" / "impl_jax.py")
CHECKED = 3


class Widening:
    def __init__(self, case: Any) -> None:
        self.inner, self.calls = HONEST.build(case), 0
        self.params, self.loss_and_grads = self.inner.params, self.inner.loss_and_grads

    def step(self) -> Any:
        self.calls += 1
        if self.calls == CHECKED + 1:
            jax.config.update("jax_enable_x64", True)
            self.inner.p = {k: jnp.asarray(v, jnp.float64) for k, v in self.inner.p.items()}
        return self.inner.step()


def build(case: Any) -> Widening:
    return Widening(case)
