"""Seed MLP in JAX, functional: the same step runs op by op (eager) or under jax.jit."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from pytest_mlbench import FunctionalSGD


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    z = jnp.tanh(x @ p["w1"]) @ p["w2"]
    return jnp.mean(jnp.logaddexp(0, z) - y * z)


def build(case: Any) -> FunctionalSGD:
    return FunctionalSGD(case, loss_fn, jax.value_and_grad)


def data_parallel_loss(case: Any) -> Any:
    """The same loss over whatever shard a data-parallel worker holds (a mean: the engine's
    all-reduce averages the shards' gradients into the global batch's)."""
    return loss_fn
