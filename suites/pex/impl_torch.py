"""Per-example clipped gradients in PyTorch: torch.func.vmap(torch.func.grad_and_value), eager
or under torch.compile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import StepTrainer, load_suite_file

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def example_loss(p: dict[str, Any], x: Any, y: Any) -> Any:
    """The loss of one example (x, y are 1-D); vmap adds the batch."""
    z = torch.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    return -torch.dot(y, torch.log_softmax(z, dim=-1))


def clip_and_average(g: dict[str, Any], clip: float) -> dict[str, Any]:
    norms = torch.sqrt(sum(v.reshape(v.shape[0], -1).pow(2).sum(dim=1) for v in g.values()))
    scale = torch.clamp(clip / norms, max=1.0)
    return {k: torch.tensordot(scale, v, dims=1) / v.shape[0] for k, v in g.items()}


def make_step(lr: float, clip: float) -> Any:
    per_example = torch.func.vmap(torch.func.grad_and_value(example_loss), in_dims=(None, 0, 0))

    def dp_step(p: dict[str, Any], x: Any, y: Any) -> Any:
        # The clipped mean leaves the step too, so loss_and_grads checks the timed function.
        g, losses = per_example(p, x, y)
        update = clip_and_average(g, clip)
        return losses.mean(), update, {k: w - lr * update[k] for k, w in p.items()}

    return dp_step


def build(case: Any) -> StepTrainer:
    clip = spec.clip_norm(case.dims["in"], case.dims["hidden"])
    return StepTrainer(case, make_step(case.learning_rate, clip))
