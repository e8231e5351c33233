"""Softmax regression in Autograd, as ADDING_WORKLOADS.md shows: the model in autograd.numpy
with its own logsumexp, gradients by reverse mode, the spec's update at the policy dtype."""

from __future__ import annotations

from typing import Any

import autograd.numpy as anp
from autograd.scipy.special import logsumexp

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return data["x"] @ p["w"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    z = forward(p, data)
    return anp.mean(logsumexp(z, axis=1) - anp.sum(data["y"] * z, axis=1))


build = functional.autograd(forward, loss)
