"""Per-example clipped gradients in JAX: jax.vmap(jax.value_and_grad(example_loss)), eager or
under jax.jit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from pytest_mlbench import StepTrainer, load_suite_file

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def example_loss(p: dict[str, Any], x: Any, y: Any) -> Any:
    """The loss of one example (x, y are 1-D); vmap adds the batch."""
    z = jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    return -jnp.dot(y, jax.nn.log_softmax(z))


def clip_and_average(g: dict[str, Any], clip: float) -> dict[str, Any]:
    norms = jnp.sqrt(sum(jnp.sum(v.reshape(v.shape[0], -1) ** 2, axis=1) for v in g.values()))
    scale = jnp.minimum(1.0, clip / norms)
    return {k: jnp.tensordot(scale, v, axes=1) / v.shape[0] for k, v in g.items()}


def make_step(lr: float, clip: float) -> Any:
    per_example = jax.vmap(jax.value_and_grad(example_loss), in_axes=(None, 0, 0))

    def dp_step(p: dict[str, Any], x: Any, y: Any) -> Any:
        # The clipped mean leaves the step too, so loss_and_grads checks the timed function.
        losses, g = per_example(p, x, y)
        update = clip_and_average(g, clip)
        return jnp.mean(losses), update, {k: w - lr * update[k] for k, w in p.items()}

    return dp_step


def build(case: Any) -> StepTrainer:
    clip = spec.clip_norm(case.dims["in"], case.dims["hidden"])
    return StepTrainer(case, make_step(case.learning_rate, clip))
