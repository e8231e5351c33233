"""Honest seed MLP in JAX: single-device jax.jit, data-parallel over a Mesh."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from pytest_mlbench import FunctionalSGD


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    z = jnp.tanh(x @ p["w1"]) @ p["w2"]
    return jnp.mean(jnp.logaddexp(0, z) - y * z)


def build(case: Any) -> Any:
    return FunctionalSGD(case, loss_fn, jax.value_and_grad)


def data_parallel_loss(case: Any) -> Any:
    return loss_fn
