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
    Fn,
    Inference,
    Model,
    Transform,
    canonical_state,
    hyper,
    mixed_model,
    one_example,
    split_inputs,
)
from pytest_mlbench.errors import Unsupported
from pytest_mlbench.precision import BACKOFF, GROWTH, GROWTH_INTERVAL, Policy

HYPER = {"learning_rate": "lr", "momentum": "momentum", "b1": "b1", "b2": "b2", "eps": "eps",
         "weight_decay": "weight_decay"}


def build(model: Model, case: Any) -> Any:
    name = model.need(case)
    if case.idiom == "donate" and name != "train":
        raise TypeError(f"variant {case.variant!r}: donation is of a training step's parameters "
                        f"and optimizer state, and a {name} case has neither")
    if case.idiom == "sdpa" and case.policy.compute == "float16" and case.id.device == "cpu":
        # jax.nn.dot_product_attention asks float16 logits for a float32 result (algorithm
        # F16_F16_F32), and under jit XLA:CPU fails to lower it (eager falls back)
        raise Unsupported("XLA:CPU has no float16 dot_general with float32 accumulation "
                          "(F16_F16_F32), which jax.nn.dot_product_attention asks for")
    kinds = {"train": ScaledTrainer if case.policy.loss_scale else Trainer, "infer": Inference,
             "jvp": Jvp, "vjp": Vjp, "hvp": Hvp, "jacfwd": Jacobian, "jacrev": Jacobian}
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


# -- dynamic loss scaling (amp16): JAX and optax have none of their own (jmp is not a
# dependency), so the policy's rule (precision.Policy) is written here, once, for every JAX
# trainer: this builder's and a suite's own (suites/mlp_layers/impl_jax.py)

def loss_scaling(policy: Policy, like: Any) -> tuple[Any, Any]:
    """The scale's start and the count of finite steps in a row, as arrays a compiled step
    carries beside the optimizer state (a new scale is data, not a recompile), placed where
    ``like`` lives (committed, as the step's outputs will be)."""
    return committed((jnp.float32(policy.loss_scale), jnp.int32(0)), like)


def loss_scaled(loss: Fn, tx: optax.GradientTransformation) -> Fn:
    """``step(p, opt_state, scaling, *data) -> (loss, grads, p, opt_state, scaling)``: the
    gradients of loss * scale divided by the scale; the optax update applied only where every
    gradient is finite, else ``p`` and ``opt_state`` kept and the scale backed off, and grown
    after GROWTH_INTERVAL finite steps in a row (jnp.where: the same under jit and eager).
    The loss and gradients returned are the unscaled ones."""
    def train_step(p: Any, opt_state: Any, scaling: Any, *data: Any) -> Any:
        scale, good = scaling

        def scaled(q: Any) -> Any:
            value = loss(q, *data)
            return value * scale, value

        (_, value), g = jax.value_and_grad(scaled, has_aux=True)(p)
        g = jax.tree.map(lambda x: x / scale, g)
        finite = jnp.all(jnp.array([jnp.isfinite(x).all() for x in jax.tree.leaves(g)]))
        updates, new_state = tx.update(g, opt_state, p)
        p, opt_state = jax.tree.map(lambda new, old: jnp.where(finite, new, old),
                                    (optax.apply_updates(p, updates), new_state), (p, opt_state))
        good = jnp.where(finite, good + 1, 0)
        grow = good == GROWTH_INTERVAL
        scale = scale * jnp.where(finite, jnp.where(grow, GROWTH, 1.0), BACKOFF)
        return value, g, p, opt_state, (scale, jnp.where(grow, 0, good))

    return train_step


class Trainer:
    """params / loss_and_grads / step / state / hyperparameters over one compiled step that
    returns the gradients too, so loss_and_grads checks the very function that is timed;
    under a loss-scaling policy the step is ``loss_scaled``'s, its scale in ``scaling``."""

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
        def train_step(p: Any, opt_state: Any, scaling: Any, data: Any) -> Any:
            loss, g = grads(p, data)
            updates, opt_state = tx.update(g, opt_state, p)
            return loss, g, optax.apply_updates(p, updates), opt_state, scaling

        self.scaling: Any = ()  # no leaves: no loss scaling
        if case.policy.loss_scale:
            self.scaling = loss_scaling(case.policy, self.p)
            train_step = loss_scaled(model.fn("loss"), tx)
        # idiom donate: the step may write its new parameters, optimizer state and loss scale
        # into the buffers of the old ones (jax.jit's donate_argnums), as a JAX training loop does
        self.donate = case.idiom == "donate"
        self.train_step = case.compile(train_step, donate=(0, 1, 2) if self.donate else ())

    def params(self) -> dict[str, Any]:
        return self.model.flat(self.p)

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        """The timed step's loss and gradients, its new parameters (and loss scale) dropped; a
        donating step is given copies (it would consume the parameters it was given)."""
        carried = self.p, self.opt_state, self.scaling
        if self.donate:
            carried = jax.tree.map(jnp.copy, carried)
        loss, g, *_ = self.train_step(*carried, self.data)
        return loss, self.model.flat(g)

    def step(self) -> Any:
        loss, _, self.p, self.opt_state, self.scaling = self.train_step(
            self.p, self.opt_state, self.scaling, self.data)
        return loss

    def state(self) -> dict[str, Any]:
        return optax_state(self.opt_state, self.model.flat)

    def hyperparameters(self) -> dict[str, float]:
        return optax_hyperparameters(self.opt_state)


class ScaledTrainer(Trainer):
    """The Trainer under a loss-scaling policy, which reads its scale back (a trainer of any
    other policy has no ``loss_scale``, and reports none)."""

    def loss_scale(self) -> Any:
        return self.scaling[0]


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
