"""After the checked steps, torch at two threads for every step (the session gave one), set back
to one in params(), which the round reads at its end: the count reads one whenever it is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file

MORE = load_suite_file(Path(__file__).parents[1] / "morecores.py")


def two_threads(inner: Any, n: int) -> Any:
    torch.set_num_threads(2)
    return inner.step()


def build(case: Any) -> Any:
    trainer = MORE.SPECS.AfterChecks(MORE.SPECS.honest("mlp", "torch").build(case), two_threads)
    honest_params = trainer.params

    def params() -> Any:
        torch.set_num_threads(1)
        return honest_params()

    trainer.params = params
    return trainer
