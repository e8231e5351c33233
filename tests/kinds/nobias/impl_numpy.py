from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import Optimizer, load_suite_file
from pytest_mlbench.builders import functional

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")


@dataclasses.dataclass(frozen=True)
class NoBiasCorrection(Optimizer):
    def _adam(self, params: Any, grads: Any, state: Any) -> Any:
        new_state: dict[str, Any] = {"count": np.asarray(float(state["count"]) + 1)}
        out = {}
        for k, p in params.items():
            m = self.b1 * state[f"m.{k}"] + (1 - self.b1) * grads[k]
            v = self.b2 * state[f"v.{k}"] + (1 - self.b2) * grads[k] ** 2
            new_state[f"m.{k}"], new_state[f"v.{k}"] = m, v
            out[k] = p - self.lr * m / (np.sqrt(v) + self.eps)
        return out, new_state


def build(case: Any) -> Any:
    broken = NoBiasCorrection(**dataclasses.asdict(case.optimizer))
    return functional.numpy(value_and_grad=MODELS.numpy_value_and_grad)(
        MODELS.with_optimizer(case, broken))
