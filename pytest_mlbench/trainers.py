"""Ready-made Trainers for implementations whose autodiff is a function transform.

JAX (``jax.value_and_grad``), Autograd (``autograd.value_and_grad``) and PyTorch
(``torch.func.grad_and_value``, through ``torch_value_and_grad``) all differentiate a pure
``loss_fn(params, *data)``; the plain-SGD Trainer around it is then the same code, written
once here. An implementation file reduces to its loss function and one ``build``:

    def build(case):
        return FunctionalSGD(case, loss_fn, jax.value_and_grad)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Transform = Callable[[Callable[..., Any]], Callable[..., Any]]


class FunctionalSGD:
    """Plain SGD on a dict of params, the step passed through ``case.compile`` (so eager and
    compiled variants run the same code), the data passed as arguments in ``data_keys`` order."""

    def __init__(self, case: Any, loss_fn: Callable[..., Any], value_and_grad: Transform,
                 data_keys: Sequence[str] = ("x", "y")) -> None:
        self.p = dict(case.params)
        self.data = tuple(case.data[k] for k in data_keys)
        grads = value_and_grad(loss_fn)
        lr = case.learning_rate

        def sgd_step(p: dict[str, Any], *data: Any) -> Any:
            loss, g = grads(p, *data)
            return loss, {k: w - lr * g[k] for k, w in p.items()}

        self.grads = case.compile(grads)
        self.sgd_step = case.compile(sgd_step)

    def params(self) -> dict[str, Any]:
        return self.p

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        return self.grads(self.p, *self.data)

    def step(self) -> Any:
        loss, self.p = self.sgd_step(self.p, *self.data)
        return loss


def torch_value_and_grad(loss_fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.func.grad_and_value`` returning (loss, grads) like the other frameworks."""
    import torch

    grad_and_value = torch.func.grad_and_value(loss_fn)

    def value_and_grad(*args: Any) -> tuple[Any, Any]:
        g, loss = grad_and_value(*args)
        return loss, g

    return value_and_grad
