"""Honest JAX: one functional step, op by op or under jax.jit."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from pytest_mlbench import FunctionalSGD


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    r = x @ p["w"] - y
    return 0.5 * jnp.mean(r * r)


def build(case: Any) -> Any:
    return FunctionalSGD(case, loss_fn, jax.value_and_grad)
