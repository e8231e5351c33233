"""torch.autocast to bfloat16 on the CPU around the features' matmul."""

from __future__ import annotations

from typing import Any

import torch

from pytest_mlbench.builders import functional


def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = torch.tanh(data["x"] @ p["w1"])
    return h.to(p["w1"].dtype) * p["w2"].T


build = functional.torch(forward)
