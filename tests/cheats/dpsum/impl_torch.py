"""Each rank's gradient multiplied by the number of ranks, its loss value unchanged: DDP's
average becomes a sum, and two workers step twice as far as one device would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "specs.py").honest("mlp", "torch")
build = HONEST.build


def data_parallel_loss(case: Any) -> Any:
    workers = case.id.workers

    def summed(p: dict[str, Any], x: Any, y: Any) -> Any:
        loss = HONEST.loss(p, {"x": x, "y": y})
        return loss + (workers - 1) * (loss - loss.detach())

    return summed
