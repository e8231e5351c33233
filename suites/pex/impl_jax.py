"""Per-example clipped gradients in JAX: jax.vmap(jax.value_and_grad(example_loss)), clipped
and averaged, stepped by optax's SGD; eager or under jax.jit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def example_loss(p: dict[str, Any], x: Any, y: Any) -> Any:
    """The loss of one example (x, y are 1-D); vmap adds the batch."""
    z = jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    return -jnp.dot(y, jax.nn.log_softmax(z))


def clip_and_average(g: dict[str, Any], clip: float) -> dict[str, Any]:
    norms = jnp.sqrt(sum(jnp.sum(v.reshape(v.shape[0], -1) ** 2, axis=1) for v in g.values()))
    scale = jnp.minimum(1.0, clip / norms)
    return {k: jnp.tensordot(scale, v, axes=1) / v.shape[0] for k, v in g.items()}


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return jnp.tanh(data["x"] @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return -jnp.mean(jnp.sum(data["y"] * jax.nn.log_softmax(forward(p, data)), axis=-1))


def clipped_mean(p: dict[str, Any], data: dict[str, Any]) -> Any:
    """(mean loss, mean of the clipped per-example gradients): the step's direction."""
    per_example = jax.vmap(jax.value_and_grad(example_loss), in_axes=(None, 0, 0))
    losses, g = per_example(p, data["x"], data["y"])
    return jnp.mean(losses), clip_and_average(g, spec.clip_norm(*p["w1"].shape))


build = functional.jax(forward, loss, value_and_grad=clipped_mean)
