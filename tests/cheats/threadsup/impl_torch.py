"""After the checked steps, torch at two threads for every step (the session gave one), set back
to one in params(), which the round reads at its end: the count reads one whenever it is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file

MORE = load_suite_file(Path(__file__).parents[1] / "morecores.py")


class TwoThreadsWhileStepping:
    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def step(self) -> Any:
        self.calls += 1
        if self.calls > MORE.SPECS.CHECKED:
            torch.set_num_threads(2)
        return self.inner.step()

    def params(self) -> Any:
        torch.set_num_threads(1)
        return self.inner.params()


def build(case: Any) -> Any:
    return TwoThreadsWhileStepping(MORE.SPECS.honest("mlp", "torch").build(case))
