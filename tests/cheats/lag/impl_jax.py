"""After the checked steps, params() returns the parameters before the latest step (a closure
that captured the previous array) and loss_and_grads() is evaluated there too: every round
looks like a right step from a state one step behind, the newest step is never waited for,
and the loss and gradient after timing agree with the parameters reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "honest" / "impl_jax.py")
CHECKED = 3


class Lagging:
    def __init__(self, case: Any) -> None:
        self.inner = HONEST.build(case)
        self.previous = self.inner.params()
        self.calls = 0

    def params(self) -> Any:
        return self.previous if self.calls > CHECKED else self.inner.params()

    def loss_and_grads(self) -> Any:
        if self.calls <= CHECKED:
            return self.inner.loss_and_grads()
        loss, g, _ = self.inner.compiled_step(self.previous, *self.inner.data)
        return loss, g

    def step(self) -> Any:
        self.calls += 1
        self.previous = self.inner.params()
        return self.inner.step()


def build(case: Any) -> Lagging:
    return Lagging(case)
