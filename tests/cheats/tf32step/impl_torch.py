"""TF32 on for each step after the checked ones, and off again before returning: the policy
reads right whenever it is asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "honest" / "impl_torch.py")
CHECKED = 3


class Toggling:
    def __init__(self, case: Any) -> None:
        self.inner, self.calls = HONEST.build(case), 0
        self.params, self.loss_and_grads = self.inner.params, self.inner.loss_and_grads

    def step(self) -> Any:
        self.calls += 1
        if self.calls <= CHECKED:
            return self.inner.step()
        torch.set_float32_matmul_precision("high")
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return self.inner.step()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.set_float32_matmul_precision("highest")


def build(case: Any) -> Toggling:
    return Toggling(case)
