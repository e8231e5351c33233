"""The graph network in NumPy: the spec's own forward and gradient, a step on each batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

GRAPH = load_suite_file(Path(__file__).parent / "spec.py")


class Trainer:
    def __init__(self, case: Any) -> None:
        self.case, self.lr = case, case.learning_rate
        self.p = {k: v.copy() for k, v in case.params.items()}

    def params(self) -> dict[str, Any]:
        return self.p

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        data = self.case.batch()
        out = GRAPH.forward(self.p, data)[2]
        loss = 0.5 * ((out - data["y"]) ** 2).mean()
        return loss, GRAPH.grad(self.p, data)

    def step(self) -> Any:
        loss, g = self.loss_and_grads()
        self.p = {k: v - self.lr * g[k] for k, v in self.p.items()}
        return loss


def build(case: Any) -> Any:
    return Trainer(case)
