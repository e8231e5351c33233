"""The honest trainer whose optimizer step reads a parameter on the host once it has updated
it (a logging line inside the step): the step's graph is cut there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "xla_honest.py")


def build(case: Any) -> Any:
    trainer = HONEST.build(case)
    update = trainer.opt.step

    def update_and_log(*args: Any, **kwargs: Any) -> Any:
        out = update(*args, **kwargs)
        float(trainer.leaves[0].sum())  # read on the host mid-step
        return out

    trainer.opt.step = update_and_log  # Trainer._update calls self.opt.step() inside the step
    return trainer
