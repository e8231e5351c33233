from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")


def build(case: Any) -> Any:
    return MODELS.OwedCalls(functional.jax(*MODELS.jax_model())(case))
