"""Seed MLP in Autograd: the loss written with autograd.numpy, gradients by reverse mode."""

from __future__ import annotations

from typing import Any

import autograd
import autograd.numpy as anp

from pytest_mlbench import FunctionalSGD


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    z = anp.tanh(x @ p["w1"]) @ p["w2"]
    return anp.mean(anp.logaddexp(0, z) - y * z)


def build(case: Any) -> FunctionalSGD:
    return FunctionalSGD(case, loss_fn, autograd.value_and_grad)
