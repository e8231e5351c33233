"""Seed MLP in Autograd: the model in autograd.numpy, gradients by reverse mode, the spec's
update applied at the policy dtype (Autograd has no optimizer)."""

from __future__ import annotations

from typing import Any

import autograd.numpy as anp

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return anp.tanh(data["x"] @ p["w1"]) @ p["w2"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    z = forward(p, data)
    return anp.mean(anp.logaddexp(0, z) - data["y"] * z)


build = functional.autograd(forward, loss)
