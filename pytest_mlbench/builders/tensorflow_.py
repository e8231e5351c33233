"""TensorFlow: training on tf.Variables through keras.optimizers (GradientTape, then
optimizer.apply; Adam and AdamW stepping as the spec's Adam, see SpecAdamStep; under amp16
through Keras's LossScaleOptimizer, see loss_scaled), inference,
and tf.autodiff.ForwardAccumulator (jvp), GradientTape with output_gradients (vjp), forward
over back (hvp) and tape.batch_jacobian (jacrev).

Refused, to be declared unsupported in the spec: jacfwd (TF has no per-example forward-mode
Jacobian), and forward mode (jvp, hvp) in the eager variant: eager ForwardAccumulator traces a
tf.function for every op it meets (forwardprop's _jvp_helper), so there is no op-by-op eager
forward mode to time."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # before keras is first imported

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from pytest_mlbench.builders.model import (  # noqa: E402
    Inference,
    Model,
    Transform,
    canonical_state,
    hyper,
    mixed_model,
    split_inputs,
    unsupported,
)
from pytest_mlbench.errors import Unsupported  # noqa: E402
from pytest_mlbench.precision import BACKOFF, GROWTH, GROWTH_INTERVAL  # noqa: E402


def build(model: Model, case: Any) -> Any:
    name = model.need(case)
    if name == "jacfwd":
        raise unsupported(model, "jacfwd", "TensorFlow has no per-example forward-mode "
                                           "Jacobian (batch_jacobian is reverse mode)")
    if name in ("jvp", "hvp") and case.mode == "eager":
        raise unsupported(model, name, "eager TensorFlow has no op-by-op forward mode (each "
                                       "op's JVP is a traced tf.function)", "eager")
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(f"keras runs on {keras.backend.backend()}, not tensorflow: unset "
                           "KERAS_BACKEND")
    kinds = {"train": Trainer, "infer": Inference, "jvp": Jvp, "vjp": Vjp, "hvp": Hvp,
             "jacrev": Jacobian}
    model = mixed_model(model, case, lambda fn: cast_policy(fn, case.policy))
    with case.adapter.device_scope():
        built = kinds[name](model, case)
    quiet_retracing_warning(case)
    return built


def cast_policy(fn: Any, policy: Any) -> Any:
    """``fn`` computing at the policy's compute dtype on float32 variables and inputs: each
    cast inside the tape (the cast's gradient brings the gradients back to float32, which
    the Keras optimizer applies to the float32 variables), the result cast back to float32.
    Keras's ``mixed_bfloat16`` and ``mixed_float16`` policies do the same inside their layers
    (float32 variables, ``compute_dtype`` bfloat16 or float16); a model in raw ops casts where
    it reads them. The loss comes back at float32, where LossScaleOptimizer scales it."""
    compute = tf.as_dtype(policy.compute)

    def down(x: Any) -> Any:
        return tf.cast(x, compute) if x.dtype.is_floating else x

    def mixed(p: Any, data: Any) -> Any:
        out = fn(tf.nest.map_structure(down, p), tf.nest.map_structure(down, data))
        return tf.nest.map_structure(lambda y: tf.cast(y, tf.float32), out)

    return mixed


def quiet_retracing_warning(case: Any) -> None:
    """Silence TF's "N out of the last M calls to <bound method Trainer._loss_and_grads ...>
    triggered tf.function retracing" for the tf.functions this builder made for ``case``.

    TF counts traces per Python code object, not per tf.function: a worker serving several
    cases builds each case's Trainer (or transform) anew, and every one of those tf.functions
    traces once, so after five cases the same code has "retraced" five times and TF warns, in
    the output of a suite that did nothing wrong. Each is traced once, before timing; a trace
    while timed is what the harness itself checks (the compile counts of every phase, and
    ``assert_no_retrace``), with a message naming the case. TF's own flag for such functions
    (it sets it on functions restored from a SavedModel) turns off only that warning."""
    for compiled in getattr(case, "compiled", ()):
        fn: Any = getattr(compiled, "fn", None)  # a tf.function for jit and xla
        if hasattr(fn, "_omit_frequent_tracing_warning"):
            fn._omit_frequent_tracing_warning = True


def optimizer(opt: Any, dtype: str) -> keras.optimizers.Optimizer:
    """The spec's optimizer as Keras's own: SGD's step as Keras writes it (v = mu v - lr g,
    p += v: the spec's b = mu b + g, p -= lr b with v = -lr b, at a constant lr); Adam and
    AdamW with the spec's update step (``SpecAdamStep``) on Keras's machinery (its moments,
    step count, learning-rate variable and AdamW's decoupled weight decay). Every constant
    enters at the variable's dtype (``exact``)."""
    with keras_floatx(dtype):
        if opt.name in ("sgd", "momentum"):
            return ExactSGD(learning_rate=opt.lr, momentum=opt.momentum)
        if opt.name == "adam":
            return SpecAdam(learning_rate=opt.lr, beta_1=opt.b1, beta_2=opt.b2,
                            epsilon=opt.eps)
        return SpecAdamW(learning_rate=opt.lr, beta_1=opt.b1, beta_2=opt.b2,
                         epsilon=opt.eps, weight_decay=opt.weight_decay)


def loss_scaled(opt: keras.optimizers.Optimizer, policy: Any) -> keras.optimizers.Optimizer:
    """The optimizer that steps: under a loss-scaling policy (amp16) ``opt`` inside Keras's
    LossScaleOptimizer, what its users train float16 with (scale_loss in the tape; apply
    unscales, skips a step with a non-finite gradient and adjusts the scale), ``opt`` itself
    otherwise. ``opt`` keeps the state and hyper-parameters the harness reads."""
    if not policy.loss_scale:
        return opt
    # Keras's growth and backoff factors are constants in its source (2.0 and 0.5,
    # keras/src/optimizers/loss_scale_optimizer.py), only the growth interval is a setting
    if (GROWTH, BACKOFF) != (2.0, 0.5):
        raise Unsupported(f"Keras's LossScaleOptimizer grows by 2 and backs off by 0.5, not "
                          f"by {GROWTH:g} and {BACKOFF:g}")
    return keras.optimizers.LossScaleOptimizer(opt, initial_scale=policy.loss_scale,
                                               dynamic_growth_steps=GROWTH_INTERVAL)


@contextlib.contextmanager
def keras_floatx(dtype: str) -> Iterator[None]:
    """Keras's float type while an optimizer is made: its learning rate is a variable of that
    type, float32 by default, so a float64 case would step with float32(lr) (1e-3 becomes
    1.00000005e-3). float64 for float64 cases; float32 otherwise (bfloat16 would make the
    learning rate 0.000999)."""
    before = keras.config.floatx()
    keras.config.set_floatx("float64" if dtype == "float64" else "float32")
    try:
        yield
    finally:
        keras.config.set_floatx(before)


def exact(value: float, dtype: Any) -> Any:
    """A Python float as a tensor of ``dtype``. keras.ops.cast(0.9, "float64") goes through
    a float32 tensor (0.8999999762), so Keras's SGD momentum, Adam's betas and AdamW's decay
    reach a float64 step rounded to float32; convert_to_tensor rounds once, to ``dtype``."""
    return keras.ops.convert_to_tensor(value, dtype=dtype)


class ExactSGD(keras.optimizers.SGD):
    """keras.optimizers.SGD's step, its momentum converted by ``exact``."""

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        ops, dtype = keras.ops, variable.dtype
        lr = ops.cast(learning_rate, dtype)
        g = ops.cast(gradient, dtype)
        if self.momentum == 0:
            self.assign_sub(variable, g * lr)
            return
        v = self.momentums[self._get_variable_index(variable)]
        self.assign(v, v * exact(self.momentum, dtype) - g * lr)
        self.assign_add(variable, v)


class SpecAdamStep:
    """Adam's step as workloads/optim.py (torch.optim.Adam, optax.adam) writes it: epsilon added to the
    root of the bias-corrected v,

        p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps),

    where Keras's Adam computes lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps): epsilon on
    the uncorrected root, an effective eps sqrt(1 - b2^t) that changes with t (a different
    algorithm wherever sqrt(v) is near eps). Moments, count and hyper-parameters are Keras's
    own; only the arithmetic of the step is the spec's."""

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        ops = keras.ops
        dtype = keras.backend.standardize_dtype(variable.dtype)
        # the bias corrections at float32 at least: bfloat16 rounds 0.999 to 1.0, and
        # 1 - b2^t would be 0
        wide = "float64" if dtype == "float64" else "float32"
        t = ops.cast(self.iterations + 1, wide)  # type: ignore[attr-defined]
        c1 = ops.cast(1 - ops.power(exact(self.beta_1, wide), t), dtype)  # type: ignore[attr-defined]
        c2 = ops.cast(1 - ops.power(exact(self.beta_2, wide), t), dtype)  # type: ignore[attr-defined]
        # each coefficient rounded once from its float64 value, 1 - b2 included: in bfloat16
        # 0.999 is 1.0, and 1 - b2 of the rounded b2 would leave v at zero
        b1, b2 = exact(self.beta_1, dtype), exact(self.beta_2, dtype)  # type: ignore[attr-defined]
        a1, a2 = exact(1 - self.beta_1, dtype), exact(1 - self.beta_2, dtype)  # type: ignore[attr-defined]
        g = ops.cast(gradient, dtype)
        index = self._get_variable_index(variable)  # type: ignore[attr-defined]
        m, v = self._momentums[index], self._velocities[index]  # type: ignore[attr-defined]
        self.assign(m, b1 * m + a1 * g)  # type: ignore[attr-defined]
        self.assign(v, b2 * v + a2 * ops.square(g))  # type: ignore[attr-defined]
        eps = exact(self.epsilon, dtype)  # type: ignore[attr-defined]
        step = ops.cast(learning_rate, dtype) * (m / c1) / (ops.sqrt(v / c2) + eps)
        self.assign_sub(variable, step)  # type: ignore[attr-defined]


class SpecAdam(SpecAdamStep, keras.optimizers.Adam):
    """keras.optimizers.Adam stepping as the spec's Adam (SpecAdamStep)."""


class SpecAdamW(SpecAdamStep, keras.optimizers.AdamW):
    """keras.optimizers.AdamW stepping as the spec's Adam, after its decoupled decay
    (p -= lr wd p, applied by Keras's apply before the step) with wd converted by ``exact``."""

    def _apply_weight_decay(self, variables: list[Any]) -> None:
        for variable in variables:
            if self._use_weight_decay(variable):
                lr = keras.ops.cast(self.learning_rate, variable.dtype)
                wd = exact(self.weight_decay, variable.dtype)
                variable.assign(variable - variable * wd * lr)


class Trainer:
    """tf.Variables in the model's tree; Keras's optimizer built on them outside any trace.
    ``opt`` is the spec's optimizer (its state and hyper-parameters are what the harness
    reads); ``stepper`` steps it, LossScaleOptimizer around it under amp16 (``loss_scaled``)."""

    def __init__(self, model: Model, case: Any) -> None:
        self.model, self.data, self.opt_spec = model, case.data, case.optimizer
        self.p = tf.nest.map_structure(tf.Variable, model.tree(case.params))
        self.variables = tf.nest.flatten(self.p)
        refuse_cpu_float16_overflow(model, self.p, case)
        self.opt = optimizer(case.optimizer, case.dtype)
        self.stepper = loss_scaled(self.opt, case.policy)
        self.stepper.build(self.variables)  # LossScaleOptimizer builds the inner one too
        self.grads = case.compile(self._loss_and_grads)
        self.train_step = case.compile(self._train_step)

    def _scaled_loss_and_grads(self, data: Any) -> Any:
        """The loss and the gradients of the loss as the stepper scales it (scale_loss: the
        loss itself but under LossScaleOptimizer)."""
        if self.model.value_and_grad is not None:
            return self.model.value_and_grad(self.p, data)
        with tf.GradientTape() as tape:
            loss = self.model.fn("loss")(self.p, data)
            scaled = self.stepper.scale_loss(loss)
        return loss, tape.gradient(scaled, self.p)

    def _loss_and_grads(self, data: Any) -> Any:
        """The loss and its gradients, unscaled as LossScaleOptimizer's apply unscales them."""
        loss, g = self._scaled_loss_and_grads(data)
        if self.stepper is not self.opt:
            scale = self.stepper.dynamic_scale  # type: ignore[attr-defined]
            g = tf.nest.map_structure(lambda x: keras.ops.divide(x, scale), g)
        return loss, g

    def _train_step(self, data: Any) -> Any:
        loss, g = self._scaled_loss_and_grads(data)
        self.stepper.apply(tf.nest.flatten(g), self.variables)
        return loss

    def params(self) -> dict[str, Any]:
        return self.model.flat(self.p)

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        loss, g = self.grads(self.data)
        return loss, self.model.flat(g)

    def step(self) -> Any:
        return self.train_step(self.data)

    def loss_scale(self) -> Any:
        """LossScaleOptimizer's dynamic scale now; None where no loss is scaled."""
        scale = getattr(self.stepper, "dynamic_scale", None)
        return None if scale is None else tf.convert_to_tensor(scale)

    def state(self) -> dict[str, Any]:
        return optimizer_state(self.opt, self.opt_spec, self.variables[0].dtype, self._tree)

    def _tree(self, per_variable: list[Any]) -> dict[str, Any]:
        """Slots built in ``self.variables`` order, arranged as the model's tree."""
        return self.model.flat(tf.nest.pack_sequence_as(self.p, list(per_variable)))

    def hyperparameters(self) -> dict[str, float]:
        return optimizer_hyperparameters(self.opt)


def refuse_cpu_float16_overflow(model: Model, p: Any, case: Any) -> None:
    """Refuse a float16 case whose loss at the start is not finite on TensorFlow's CPU
    kernels, which sum float16 at float16 (Eigen's: tf.reduce_mean of 10,000 float16 100s is
    inf; XLA:CPU sums at float32): the inf is the kernels', not the implementation's."""
    if case.policy.compute != "float16" or case.id.device != "cpu" or case.mode == "xla":
        return
    if not bool(tf.math.is_finite(model.fn("loss")(p, case.data))):
        raise Unsupported("TensorFlow's CPU kernels sum float16 at float16 (XLA's at float32), "
                          "and this loss overflows float16 at the start: run variant xla")


def optimizer_state(opt: Any, spec: Any, dtype: Any,
                    arrange: Callable[[list[Any]], dict[str, Any]]) -> dict[str, Any]:
    """Keras's optimizer state in the canonical names, each slot's per-variable list (in the
    order the optimizer was built on) made the spec's flat dict by ``arrange``."""
    slots: dict[str, Any] = {}
    if spec.name == "momentum":
        # Keras keeps v = mu v - lr g and steps p += v; torch's (and the spec's) buffer
        # is b = mu b + g with p -= lr b, so b = -v / lr
        lr = tf.cast(opt.learning_rate, dtype)
        slots["momentum"] = arrange([-v / lr for v in opt.momentums])
    elif spec.counted:
        slots["m"] = arrange(list(opt._momentums))
        slots["v"] = arrange(list(opt._velocities))
    return canonical_state(slots, opt.iterations if spec.counted else None)


def optimizer_hyperparameters(opt: Any) -> dict[str, float]:
    """The optimizer's own settings; a variable (the learning rate, a MirroredVariable under a
    tf.distribute strategy) read as the value it holds, Python numbers as they are."""
    def read(value: Any) -> Any:
        return value if value is None or isinstance(value, int | float) else \
            tf.convert_to_tensor(value).numpy()

    return hyper({"lr": read(opt.learning_rate),
                  "momentum": read(getattr(opt, "momentum", None)),
                  "b1": read(getattr(opt, "beta_1", None)), "b2": read(getattr(opt, "beta_2", None)),
                  "eps": read(getattr(opt, "epsilon", None)),
                  "weight_decay": read(getattr(opt, "weight_decay", None))})


class Jvp(Transform):
    """Outputs' tangent along a parameter tangent: tf.autodiff.ForwardAccumulator."""

    def make(self) -> Any:
        forward = self.model.fn("forward")

        def jvp(p: Any, data: Any, tangent: Any) -> Any:
            with tf.autodiff.ForwardAccumulator(p, tangent) as acc:
                out = forward(p, data)
            return acc.jvp(out)

        return jvp

    def apply(self, probe: Any) -> Any:
        return self.fn(self.p, self.data, self.model.tree(probe))


class Vjp(Transform):
    """Parameter cotangent of an output cotangent ``u``: GradientTape(output_gradients=u)."""

    def make(self) -> Any:
        forward = self.model.fn("forward")

        def vjp(p: Any, data: Any, u: Any) -> Any:
            with tf.GradientTape() as tape:
                tape.watch(p)
                out = forward(p, data)
            return tape.gradient(out, p, output_gradients=u)

        return vjp

    def apply(self, probe: Any) -> Any:
        return self.model.flat(self.fn(self.p, self.data, probe["u"]))


class Hvp(Transform):
    """Hessian of the loss times a parameter vector: a ForwardAccumulator over a
    GradientTape (forward over back, as TF's own guide computes HVPs)."""

    def make(self) -> Any:
        loss = self.model.fn("loss")

        def hvp(p: Any, data: Any, v: Any) -> Any:
            with tf.autodiff.ForwardAccumulator(p, v) as acc:
                with tf.GradientTape() as tape:
                    tape.watch(p)
                    value = loss(p, data)
                grads = tape.gradient(value, p)
            return acc.jvp(grads)

        return hvp

    def apply(self, probe: Any) -> Any:
        return self.model.flat(self.fn(self.p, self.data, self.model.tree(probe)))


class Jacobian(Transform):
    """Per-example Jacobian of the outputs w.r.t. the first input: tape.batch_jacobian."""

    def make(self) -> Any:
        forward, case = self.model.fn("forward"), self.case
        # pfor vectorises the rows of the Jacobian in a graph; eager, it traces a new
        # tf.function on every call, so eager takes the rows one by one (a while loop)
        pfor = case.mode != "eager"

        def jacobian(p: Any, inputs: Any) -> Any:
            key, x, rest = split_inputs(case, inputs)
            with tf.GradientTape(persistent=not pfor) as tape:  # the loop reuses the tape
                tape.watch(x)
                out = forward(p, {**rest, key: x})
            return tape.batch_jacobian(out, x, experimental_use_pfor=pfor)

        return jacobian

    def apply(self, probe: Any) -> Any:
        return self.fn(self.p, probe)
