"""Honest code: the cheating is in the hook's adapter (hooks.py), which switches the Mesh step
to the first half of the global batch after the checked steps, through a second jitted step
warmed up while building."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "dphonest" / "impl_jax.py")


def build(case: Any) -> Any:
    return HONEST.build(case)


def data_parallel_loss(case: Any) -> Any:
    return HONEST.loss_fn
