from __future__ import annotations

from pathlib import Path
from typing import Any

import jax.numpy as jnp

from pytest_mlbench import load_suite_file, sgd
from pytest_mlbench.builders import functional

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")


class StaleBuffer(MODELS.Wrapped):  # type: ignore[misc,name-defined]
    def __init__(self, case: Any) -> None:
        super().__init__(functional.jax(*MODELS.jax_model())(
            MODELS.with_optimizer(case, sgd(case.optimizer.lr))))
        self.spec = case.optimizer

    def state(self) -> dict[str, Any]:
        return {f"momentum.{k}": jnp.zeros_like(v) for k, v in self.inner.params().items()}

    def hyperparameters(self) -> dict[str, float]:
        return self.spec.hyperparameters


def build(case: Any) -> Any:
    return StaleBuffer(case)
