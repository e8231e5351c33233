"""The honest torch least squares of the xla folders (copied to the suites root), through the
builders: torch.optim on nn.Parameters, the step compiled by case.compile, as suites/vit and
suites/gpt are."""

from __future__ import annotations

from typing import Any

import torch

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], d: dict[str, Any]) -> Any:
    return d["x"] @ p["w"]


def loss(p: dict[str, Any], d: dict[str, Any]) -> Any:
    r = forward(p, d) - d["y"]
    return 0.5 * torch.mean(r * r)


build = functional.torch(forward, loss)
