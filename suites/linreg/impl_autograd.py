"""Linear regression in Autograd: the loss in autograd.numpy, gradients by reverse mode."""

from __future__ import annotations

from typing import Any

import autograd
import autograd.numpy as anp

from pytest_mlbench import FunctionalSGD


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    r = x @ p["w"] + p["b"] - y
    return anp.mean(r * r)


def build(case: Any) -> FunctionalSGD:
    return FunctionalSGD(case, loss_fn, autograd.value_and_grad)
