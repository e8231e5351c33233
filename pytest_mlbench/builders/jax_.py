"""JAX: training through optax (``inject_hyperparams``, so the optimizer's own values read
back), inference, and jax.jvp / jax.vjp / jvp-of-grad / vmap(jacfwd | jacrev). Every step is
one function passed through ``case.compile``: op by op for eager, jax.jit for jit."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import optax

from pytest_mlbench.builders.model import (
    Inference,
    Model,
    Transform,
    canonical_state,
    hyper,
    mixed_model,
    one_example,
    split_inputs,
)

HYPER = {"learning_rate": "lr", "momentum": "momentum", "b1": "b1", "b2": "b2", "eps": "eps",
         "weight_decay": "weight_decay"}


def build(model: Model, case: Any) -> Any:
    name = model.need(case)
    if case.idiom == "donate" and name != "train":
        raise TypeError(f"variant {case.variant!r}: donation is of a training step's parameters "
                        f"and optimizer state, and a {name} case has neither")
    kinds = {"train": Trainer, "infer": Inference, "jvp": Jvp, "vjp": Vjp, "hvp": Hvp,
             "jacfwd": Jacobian, "jacrev": Jacobian}
    return kinds[name](mixed_model(model, case, lambda fn: cast_policy(fn, case.policy)), case)


def cast_policy(fn: Any, policy: Any) -> Any:
    """``fn`` computing at the policy's compute dtype: its float32 parameters and inputs cast
    on the way in, its result cast back to float32 (JAX's mixed precision as jmp and Flax's
    ``dtype`` / ``param_dtype`` do it: the cast's transpose brings the gradients back to the
    float32 parameters, and optax updates them there)."""
    compute = jnp.dtype(policy.compute)

    def down(x: Any) -> Any:
        return x.astype(compute) if jnp.issubdtype(x.dtype, jnp.floating) else x

    def mixed(p: Any, data: Any) -> Any:
        out = fn(jax.tree.map(down, p), jax.tree.map(down, data))
        return jax.tree.map(lambda y: y.astype(jnp.float32), out)

    return mixed


def transformation(opt: Any, dtype: str) -> optax.GradientTransformation:
    """The spec's optimizer as optax's own, its hyper-parameters injected as state. Optax
    would store them at the parameters' dtype; bfloat16 has 8 bits of mantissa, which makes
    lr 1e-3 into 0.000999 and momentum 0.9 into 0.898: they are kept in float32, and the
    slots they scale (momentum, Adam's moments) stay at the parameters' dtype, as torch's and
    Keras's optimizers keep them (``slots_keep_dtype``)."""
    low = dtype == "bfloat16"
    make = functools.partial(optax.inject_hyperparams, hyperparam_dtype=jnp.float32 if low else None)
    factory = {"sgd": optax.sgd, "momentum": optax.sgd, "adam": optax.adam,
               "adamw": optax.adamw}[opt.name]
    make_tx = make(slots_keep_dtype(factory) if low else factory)
    if opt.name == "sgd":
        return make_tx(learning_rate=opt.lr)
    if opt.name == "momentum":
        return make_tx(learning_rate=opt.lr, momentum=opt.momentum)
    if opt.name == "adam":
        return make_tx(learning_rate=opt.lr, b1=opt.b1, b2=opt.b2, eps=opt.eps)
    return make_tx(learning_rate=opt.lr, b1=opt.b1, b2=opt.b2, eps=opt.eps,
                   weight_decay=opt.weight_decay)


def slots_keep_dtype(factory: Any) -> Any:
    """``factory``'s transformation with every floating slot of its state cast back, after
    each update, to the dtype it was created at: a float32 hyper-parameter times a bfloat16
    slot is float32 in JAX (``decay * trace``), which would carry the momentum in float32
    from the first step on (seen on an H200: the dtype check after the first step failed)."""
    @functools.wraps(factory)  # inject_hyperparams reads the factory's signature
    def wrapped(*args: Any, **kwargs: Any) -> optax.GradientTransformation:
        inner = factory(*args, **kwargs)

        def update(updates: Any, state: Any, params: Any = None, **extra: Any) -> Any:
            updates, new = inner.update(updates, state, params, **extra)
            return updates, jax.tree.map(_like, new, state)

        return optax.GradientTransformation(inner.init, update)

    return wrapped


def _like(new: Any, old: Any) -> Any:
    dtype = getattr(old, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jnp.floating) and new.dtype != dtype:
        return new.astype(dtype)
    return new


def committed(tree: Any, like: Any) -> Any:
    """``tree`` placed where the first array of ``like`` lives."""
    sharding = jax.tree.leaves(like)[0].sharding
    return jax.device_put(tree, sharding)


class Trainer:
    """params / loss_and_grads / step / state / hyperparameters over one compiled step that
    returns the gradients too, so loss_and_grads checks the very function that is timed."""

    def __init__(self, model: Model, case: Any) -> None:
        self.model, self.data = model, case.data
        self.p = model.tree(case.params)
        self.tx = transformation(case.optimizer, case.dtype)
        # on the parameters' device, committed like the step's outputs: optax makes its state
        # uncommitted, and jit compiles a step again for committed arguments (the second
        # step compiled the whole train step a second time, 2.4 s for gpt)
        self.opt_state = committed(self.tx.init(self.p), self.p)
        grads = model.value_and_grad or jax.value_and_grad(model.fn("loss"))
        tx = self.tx

        # eager: this step op by op; optax's own jitted helpers (Adam's bias correction) run
        # as optax ships them. Under jax.disable_jit the correction's step count is a
        # concrete integer, and its power compiled a new integer_pow at every step: compile
        # time in every timed round (which frameworks/jax_._Compiles now counts)
        def train_step(p: Any, opt_state: Any, data: Any) -> Any:
            loss, g = grads(p, data)
            updates, opt_state = tx.update(g, opt_state, p)
            return loss, g, optax.apply_updates(p, updates), opt_state

        # idiom donate: the step may write its new parameters and optimizer state into the
        # buffers of the old ones (jax.jit's donate_argnums), as a JAX training loop does
        self.donate = case.idiom == "donate"
        self.train_step = case.compile(train_step, donate=(0, 1) if self.donate else ())

    def params(self) -> dict[str, Any]:
        return self.model.flat(self.p)

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        """The timed step's loss and gradients, its new parameters dropped; a donating step is
        given copies (it would consume the parameters it was given)."""
        p, opt_state = self.p, self.opt_state
        if self.donate:
            p, opt_state = jax.tree.map(jnp.copy, (p, opt_state))
        loss, g, _, _ = self.train_step(p, opt_state, self.data)
        return loss, self.model.flat(g)

    def step(self) -> Any:
        loss, _, self.p, self.opt_state = self.train_step(self.p, self.opt_state, self.data)
        return loss

    def state(self) -> dict[str, Any]:
        return optax_state(self.opt_state, self.model.flat)

    def hyperparameters(self) -> dict[str, float]:
        return optax_hyperparameters(self.opt_state)


def optax_state(opt_state: Any, flat: Any = dict) -> dict[str, Any]:
    """An ``inject_hyperparams`` optimizer's state in the canonical names (``flat``: the
    model's tree to the spec's flat dict of named arrays)."""
    slots, count = {}, None
    for part in opt_state.inner_state:
        if isinstance(part, optax.TraceState):
            slots["momentum"] = flat(part.trace)
        elif isinstance(part, optax.ScaleByAdamState):
            slots["m"], slots["v"] = flat(part.mu), flat(part.nu)
            count = part.count
    return canonical_state(slots, count)


def optax_hyperparameters(opt_state: Any) -> dict[str, float]:
    """The hyper-parameters an ``inject_hyperparams`` optimizer holds, as the spec names them."""
    found = opt_state.hyperparams
    return hyper({HYPER[k]: v for k, v in found.items() if k in HYPER})


class Jvp(Transform):
    """Outputs' tangent along a parameter tangent: jax.jvp (forward mode)."""

    def make(self) -> Any:
        forward = self.model.fn("forward")

        def jvp(p: Any, data: Any, tangent: Any) -> Any:
            return jax.jvp(lambda q: forward(q, data), (p,), (tangent,))[1]

        return jvp

    def apply(self, probe: Any) -> Any:
        return self.fn(self.p, self.data, self.model.tree(probe))


class Vjp(Transform):
    """Parameter cotangent of an output cotangent ``u``: jax.vjp (reverse mode)."""

    def make(self) -> Any:
        forward = self.model.fn("forward")

        def vjp(p: Any, data: Any, u: Any) -> Any:
            return jax.vjp(lambda q: forward(q, data), p)[1](u)[0]

        return vjp

    def apply(self, probe: Any) -> Any:
        return self.model.flat(self.fn(self.p, self.data, probe["u"]))


class Hvp(Transform):
    """Hessian of the loss times a parameter vector: forward over reverse (jvp of grad)."""

    def make(self) -> Any:
        loss = self.model.fn("loss")

        def hvp(p: Any, data: Any, v: Any) -> Any:
            grad = jax.grad(lambda q: loss(q, data))
            return jax.jvp(grad, (p,), (v,))[1]

        return hvp

    def apply(self, probe: Any) -> Any:
        return self.model.flat(self.fn(self.p, self.data, self.model.tree(probe)))


class Jacobian(Transform):
    """Per-example Jacobian of the outputs w.r.t. the first input: vmap(jacfwd | jacrev)."""

    def make(self) -> Any:
        forward, case = self.model.fn("forward"), self.case
        mode = jax.jacfwd if case.task.transform == "jacfwd" else jax.jacrev

        def jacobian(p: Any, inputs: Any) -> Any:
            key, x, rest = split_inputs(case, inputs)
            return jax.vmap(mode(one_example(forward, p, key)))(x, rest)

        return jacobian

    def apply(self, probe: Any) -> Any:
        return self.fn(self.p, probe)
