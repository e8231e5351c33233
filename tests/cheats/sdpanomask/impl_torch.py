"""The suite's GPT, its fused-attention idiom without is_causal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch.nn.functional as F

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

HONEST = load_suite_file(Path(__file__).parents[1] / "specs.py").honest("gpt", "torch")


def unmasked(q: Any, k: Any, v: Any) -> Any:
    return F.scaled_dot_product_attention(q, k, v)


build = functional.torch(HONEST.forward, HONEST.loss, idioms={"sdpa": HONEST.model(unmasked)})
