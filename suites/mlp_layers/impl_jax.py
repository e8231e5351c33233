"""Seed MLP with Flax Linen layers and an Optax SGD optimizer, eager or under jax.jit.

Linen's Dense kernel is (in, out), the spec's own layout, so the seeded weights go in as they
are; eval_shape of the model's init checks that the tree they go into is the one Flax builds."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from pytest_mlbench.builders.jax_ import loss_scaled, loss_scaling

LAYERS = {"w1": "layers_0", "w2": "layers_2"}  # spec name -> the Dense's name in Sequential


def make_model(hidden: int, n_out: int, dtype: Any, compute: Any = None) -> nn.Sequential:
    """``dtype`` the parameters', ``compute`` the layers' arithmetic (Flax's mixed precision:
    ``param_dtype`` float32, ``dtype`` bfloat16 under the amp policy)."""
    def dense(features: int) -> nn.Dense:
        return nn.Dense(features, use_bias=False, dtype=compute or dtype, param_dtype=dtype)

    return nn.Sequential([dense(hidden), nn.tanh, dense(n_out)])


def to_variables(p: dict[str, Any]) -> dict[str, Any]:
    return {"params": {layer: {"kernel": p[k]} for k, layer in LAYERS.items()}}


def from_variables(variables: dict[str, Any]) -> dict[str, Any]:
    return {k: variables["params"][layer]["kernel"] for k, layer in LAYERS.items()}


def check_layout(model: nn.Sequential, variables: dict[str, Any], x: Any) -> None:
    """The copied-in weights have exactly the tree, shapes and dtypes model.init would make."""
    expected = jax.eval_shape(model.init, jax.random.key(0), x)
    actual = jax.eval_shape(lambda: variables)
    if expected != actual:
        raise ValueError(f"seeded weights {actual} do not fit the Flax model's {expected}")


class Trainer:
    make_model, to_variables = staticmethod(make_model), staticmethod(to_variables)

    def __init__(self, case: Any) -> None:
        w1, w2 = case.params["w1"], case.params["w2"]
        self.batch = case.batch  # the step's batch: read at every step
        compute = jnp.dtype(case.policy.compute) if case.policy.mixed else None
        self.model = self.make_model(w1.shape[1], w2.shape[1], w1.dtype, compute)
        self.variables = self.to_variables(case.params)
        check_layout(self.model, self.variables, self.batch()["x"])
        self.opt = optax.sgd(case.learning_rate)
        self.opt_state = self.opt.init(self.variables)
        self.compile_steps(case)

    def compile_steps(self, case: Any) -> None:
        self.grads = case.compile(jax.value_and_grad(self._loss))
        self.sgd_step = case.compile(self._sgd_step)

    def _loss(self, variables: Any, x: Any, y: Any) -> Any:
        logits = self.model.apply(variables, x).astype(x.dtype)  # the loss at float32 under amp
        return jnp.mean(optax.sigmoid_binary_cross_entropy(logits, y))

    def _sgd_step(self, variables: Any, opt_state: Any, x: Any, y: Any) -> Any:
        loss, g = jax.value_and_grad(self._loss)(variables, x, y)
        updates, opt_state = self.opt.update(g, opt_state, variables)
        return loss, optax.apply_updates(variables, updates), opt_state

    def params(self) -> dict[str, Any]:
        return from_variables(self.variables)

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        loss, g = self.grads(self.variables, self.batch()["x"], self.batch()["y"])
        return loss, from_variables(g)

    def step(self) -> Any:
        loss, self.variables, self.opt_state = self.sgd_step(self.variables, self.opt_state,
                                                             self.batch()["x"], self.batch()["y"])
        return loss


class ScaledTrainer(Trainer):
    """amp16: one compiled step with the builder's dynamic loss scale (JAX has none of its
    own: builders/jax_.py loss_scaled), which loss_and_grads calls too, dropping its new
    variables and scale (the unscaled gradients, that float16 alone would underflow)."""

    def compile_steps(self, case: Any) -> None:
        self.scaling = loss_scaling(case.policy, self.variables)
        self.scaled_step = case.compile(loss_scaled(self._loss, self.opt))

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        batch = self.batch()
        loss, g, *_ = self.scaled_step(self.variables, self.opt_state, self.scaling,
                                       batch["x"], batch["y"])
        return loss, from_variables(g)

    def step(self) -> Any:
        batch = self.batch()
        loss, _, self.variables, self.opt_state, self.scaling = self.scaled_step(
            self.variables, self.opt_state, self.scaling, batch["x"], batch["y"])
        return loss

    def loss_scale(self) -> Any:
        return self.scaling[0]


def build(case: Any) -> Trainer:
    return ScaledTrainer(case) if case.policy.loss_scale else Trainer(case)
