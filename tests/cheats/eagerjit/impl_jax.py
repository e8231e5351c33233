"""The eager variant's step, secretly under jax.jit."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from pytest_mlbench import StepTrainer, sgd_step


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    r = x @ p["w"] - y
    return 0.5 * jnp.mean(r * r)


def build(case: Any) -> StepTrainer:
    return StepTrainer(case, jax.jit(sgd_step(loss_fn, jax.value_and_grad, case.learning_rate)))
