"""Seed MLP in JAX, functional: the same step runs op by op (eager) or under jax.jit."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from pytest_mlbench.trainers import FunctionalSGD


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    z = jnp.tanh(x @ p["w1"]) @ p["w2"]
    return jnp.mean(jnp.logaddexp(0, z) - y * z)


def build(case: Any) -> FunctionalSGD:
    return FunctionalSGD(case, loss_fn, jax.value_and_grad)
