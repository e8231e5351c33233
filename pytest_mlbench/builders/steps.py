"""A Trainer around one hand-written step function: the level below the builders of
``pytest_mlbench.builders.functional``, for an implementation that writes its whole step
itself (tests/cheats use it to write steps that misbehave on purpose). A workload's
implementation normally uses a builder: ``functional.jax(forward, loss)`` and friends.

``StepTrainer`` is a Trainer around one step function ``(params, *data) -> (loss, grads, new
params)`` passed through ``case.compile``; the data go in positionally in ``data_keys`` order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Transform = Callable[[Callable[..., Any]], Callable[..., Any]]
Step = Callable[..., tuple[Any, Any, Any]]  # (params, *data) -> (loss, grads, new params)


class StepTrainer:
    """A Trainer around one step function, passed through ``case.compile`` (so eager and
    compiled variants run the same code). The step returns the gradients too, so
    ``loss_and_grads`` checks the very function that is timed, and each case compiles once.

    ``to_model``/``from_model`` map the spec's flat dict of named arrays to the structure the
    step takes (a nested tree, say) and back; the data go in as arguments in ``data_keys`` order.
    """

    def __init__(self, case: Any, step: Step, data_keys: Sequence[str] = ("x", "y"),
                 to_model: Callable[[Any], Any] = dict,
                 from_model: Callable[[Any], Any] = dict) -> None:
        self.p, self.from_model = to_model(case.params), from_model
        self.case, self.data_keys = case, tuple(data_keys)
        self.compiled_step = case.compile(step)

    @property
    def data(self) -> tuple[Any, ...]:
        """The batch of the step being called (Case.batch), in ``data_keys`` order."""
        found = self.case.batch()
        return tuple(found[k] for k in self.data_keys)

    def params(self) -> Any:
        return self.from_model(self.p)

    def loss_and_grads(self) -> tuple[Any, Any]:
        loss, grads, _ = self.compiled_step(self.p, *self.data)
        return loss, self.from_model(grads)

    def step(self) -> Any:
        loss, _, self.p = self.compiled_step(self.p, *self.data)
        return loss


def sgd_step(loss_fn: Callable[..., Any], value_and_grad: Transform, lr: float) -> Step:
    """Plain SGD on a flat dict of params, returning (loss, grads, new params)."""
    grads = value_and_grad(loss_fn)

    def step(p: dict[str, Any], *data: Any) -> tuple[Any, Any, Any]:
        loss, g = grads(p, *data)
        return loss, g, {k: w - lr * g[k] for k, w in p.items()}

    return step


def FunctionalSGD(case: Any, loss_fn: Callable[..., Any], value_and_grad: Transform,  # noqa: N802
                  data_keys: Sequence[str] = ("x", "y")) -> StepTrainer:
    """The Trainer for plain SGD on ``loss_fn(params, *data)`` under ``value_and_grad``."""
    return StepTrainer(case, sgd_step(loss_fn, value_and_grad, case.learning_rate), data_keys)


def torch_value_and_grad(loss_fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.func.grad_and_value`` returning (loss, grads) like the other frameworks."""
    import torch

    grad_and_value = torch.func.grad_and_value(loss_fn)

    def value_and_grad(*args: Any) -> tuple[Any, Any]:
        g, loss = grad_and_value(*args)
        return loss, g

    return value_and_grad
