from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file, momentum
from pytest_mlbench.builders import functional

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")


def build(case: Any) -> Any:
    return functional.jax(*MODELS.jax_model())(MODELS.with_optimizer(case, momentum(0.05, 0.8)))
