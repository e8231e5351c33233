"""Builders: a model written in one framework's own ops becomes an implementation of any task
of its workload, following engine/runners.py's protocols exactly. An implementation file is
then its model and one line:

    def forward(params, data): ...   # the outputs; data is a dict (probes: the input keys)
    def loss(params, data): ...      # the scalar mean loss

    build = functional.jax(forward, loss)    # or torch, tensorflow, autograd, numpy

``build(case)`` returns, for the case's task:

- ``train``: a trainer stepping with the framework's own optimizer (optax through
  inject_hyperparams, torch.optim, keras.optimizers; Autograd and NumPy, which have none, the
  spec's update at the policy dtype), one algorithm in all (Keras's Adam gets the spec's
  epsilon placement, torch's Adam a float64 step count), reporting params, state in canonical names and the
  optimizer's hyper-parameters read back from it;
- ``infer``: ``forward(inputs)``;
- ``transform``: ``apply(probe)`` with the framework's own jvp, vjp, Hessian-vector product
  (forward over reverse where the framework has forward mode) or per-example Jacobian.

Every function that runs goes through ``case.compile`` (the case's variant's mode). Options:
``to_model`` / ``from_model`` map the spec's flat named arrays to the model's tree (nesting or
another layout, NCHW kernels say) and back; ``value_and_grad(params, data) -> (loss, grads)``
replaces autodiff of ``loss`` for a step that follows another direction (DP-SGD's clipped
per-example mean), and is how a NumPy implementation brings its hand-written gradient;
``idioms={name: (forward, loss)}`` the same model written other ways, one variant each
(``jit+sdpa``, pytest_mlbench/variants.py); STEP_IDIOMS, the step built another way, which
every implementation of a framework has (JAX's ``jit+donate``).
What a framework lacks (TF and Autograd: a forward-mode Jacobian) raises, naming the spec's
``unsupported`` entry to declare. Importing this module imports no framework.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from pytest_mlbench.builders.model import Model
from pytest_mlbench.builders.steps import FunctionalSGD, StepTrainer, sgd_step, torch_value_and_grad

Fn = Callable[..., Any]
Build = Callable[[Any], Any]
MODULES = {"jax": "jax_", "torch": "torch_", "tensorflow": "tensorflow_",
           "autograd": "numpy_", "numpy": "numpy_"}
# idioms of the training step rather than of the model, which every implementation of the
# framework has: its plain model, built the idiom's way (donate: jax.jit's donate_argnums on
# the parameters and optimizer state, builders/jax_.py Trainer)
STEP_IDIOMS = {"jax": ("donate",)}

__all__ = ["jax", "torch", "tensorflow", "autograd", "numpy", "Model", "Build",
           # a Trainer around a hand-written step (pytest_mlbench.builders.steps)
           "StepTrainer", "FunctionalSGD", "sgd_step", "torch_value_and_grad"]


def builder(framework: str, forward: Fn | None, loss: Fn | None, *,
            to_model: Fn | None = None, from_model: Fn | None = None,
            value_and_grad: Fn | None = None,
            idioms: Mapping[str, tuple[Fn, ...]] | None = None) -> Build:
    """``build(case)`` for ``framework``; the framework is imported when a case is built.
    ``idioms`` maps an idiom's name to its ``(forward, loss)``, or ``(forward, loss,
    to_model, from_model)`` where the idiom lays the parameters out its own way
    (channels-last kernels): the same model written another way (fused attention, a scan).
    The case's variant names it (``jit+sdpa``), and the builder builds it exactly as the
    plain model, through the same checks."""
    if (to_model is None) != (from_model is None):
        raise TypeError(f"functional.{framework}: give both to_model and from_model (one maps "
                        "the spec's params to the model's tree, the other maps back), or neither")
    model = Model(framework, forward, loss, to_model, from_model, value_and_grad)
    models = {"": model}
    for name, given in (idioms or {}).items():
        fwd, lss, *layout = given
        there, back = layout if layout else (to_model, from_model)
        models[name] = Model(framework, fwd, lss, there, back, value_and_grad)

    steps = STEP_IDIOMS.get(framework, ())

    def build(case: Any) -> Any:
        chosen = models.get("" if case.idiom in steps else case.idiom)
        if chosen is None:
            have = [*(repr(k) for k in models if k), *(repr(k) for k in steps)]
            raise TypeError(f"functional.{framework}: variant {case.variant!r} names idiom "
                            f"{case.idiom!r}, which this implementation does not have (its "
                            f"idioms: {', '.join(have) or 'none'}); "
                            "give it in idioms={name: (forward, loss)}")
        module = importlib.import_module(f"pytest_mlbench.builders.{MODULES[framework]}")
        return module.build(chosen, case)

    build.model = model  # type: ignore[attr-defined]  # for tests and introspection
    build.idioms = dict(models)  # type: ignore[attr-defined]
    return build


def jax(forward: Fn | None = None, loss: Fn | None = None, **options: Any) -> Build:
    """JAX: optax, jax.jvp / vjp, jvp of grad, vmap(jacfwd | jacrev); jit through jax.jit."""
    return builder("jax", forward, loss, **options)


def torch(forward: Fn | None = None, loss: Fn | None = None, **options: Any) -> Build:
    """PyTorch: torch.optim on nn.Parameters, torch.func transforms; jit: torch.compile."""
    return builder("torch", forward, loss, **options)


def tensorflow(forward: Fn | None = None, loss: Fn | None = None, **options: Any) -> Build:
    """TensorFlow: keras.optimizers on tf.Variables, ForwardAccumulator, GradientTape;
    jit / xla: tf.function (jit_compile for xla)."""
    return builder("tensorflow", forward, loss, **options)


def autograd(forward: Fn | None = None, loss: Fn | None = None, **options: Any) -> Build:
    """Autograd: value_and_grad, make_jvp, make_vjp, make_hvp, jacobian; eager only."""
    return builder("autograd", forward, loss, **options)


def numpy(forward: Fn | None = None, loss: Fn | None = None, **options: Any) -> Build:
    """NumPy: inference, and training steps from a hand-written ``value_and_grad``."""
    return builder("numpy", forward, loss, **options)
