from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
forward, loss = MODELS.jax_model()


def off(p: Any, d: Any) -> Any:
    return forward(p, d) + 1e-3


build = functional.jax(off, loss)
