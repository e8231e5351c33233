"""Per-example clipped gradients in PyTorch: torch.func.vmap(torch.func.grad_and_value), clipped
and averaged into the parameters' .grad, stepped by torch.optim.SGD; eager or with the whole
step under torch.compile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def example_loss(p: dict[str, Any], x: Any, y: Any) -> Any:
    """The loss of one example (x, y are 1-D); vmap adds the batch."""
    z = torch.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    return -torch.dot(y, torch.log_softmax(z, dim=-1))


def clip_and_average(g: dict[str, Any], clip: float) -> dict[str, Any]:
    norms = torch.sqrt(sum(v.reshape(v.shape[0], -1).pow(2).sum(dim=1) for v in g.values()))
    scale = torch.clamp(clip / norms, max=1.0)
    return {k: torch.tensordot(scale, v, dims=1) / v.shape[0] for k, v in g.items()}


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return torch.tanh(data["x"] @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
    return -(data["y"] * torch.log_softmax(forward(p, data), dim=-1)).sum(dim=-1).mean()


def clipped_mean(p: dict[str, Any], data: dict[str, Any]) -> Any:
    """(mean loss, mean of the clipped per-example gradients): the step's direction."""
    per_example = torch.func.vmap(torch.func.grad_and_value(example_loss), in_dims=(None, 0, 0))
    g, losses = per_example(p, data["x"], data["y"])
    return losses.mean(), clip_and_average(g, spec.clip_norm(*p["w1"].shape))


build = functional.torch(forward, loss, value_and_grad=clipped_mean)
