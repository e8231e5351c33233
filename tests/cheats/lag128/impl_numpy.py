"""The seed MLP's honest NumPy trainer; after 128 steps params() a step behind, and the
loss and gradient evaluated there too, so that the checks after timing agree with what it
reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
HONEST_STEPS = 128


class Behind(SPECS.MlpNumpy):  # type: ignore[misc,name-defined]
    def __init__(self, case: Any) -> None:
        super().__init__(case)
        self.calls, self.previous, self.stepping = 0, super().params(), False

    def params(self) -> Any:
        return self.previous if self.calls > HONEST_STEPS else super().params()

    def loss_and_grads(self) -> Any:
        if self.calls <= HONEST_STEPS or self.stepping:
            return super().loss_and_grads()
        ahead = self.w1, self.w2
        self.w1, self.w2 = self.previous["w1"], self.previous["w2"]
        try:
            return super().loss_and_grads()
        finally:
            self.w1, self.w2 = ahead

    def step(self) -> Any:
        self.calls += 1
        self.previous = super().params()
        self.stepping = True  # the step itself works on the true parameters
        try:
            return super().step()
        finally:
            self.stepping = False


def build(case: Any) -> Any:
    return Behind(case)
