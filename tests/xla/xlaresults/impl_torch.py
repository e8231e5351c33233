"""The honest trainer whose params() hands back host copies of its parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "xla_honest.py")


def build(case: Any) -> Any:
    trainer = HONEST.build(case)
    on_device = trainer.params
    trainer.params = lambda: {k: v.cpu() for k, v in on_device().items()}
    return trainer
