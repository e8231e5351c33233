"""After the checked steps, every step is handed to a Python thread; step() returns at once
with the last finished loss and params() the last finished parameters, so the adapter's sync
has nothing to wait for. The sleep stands for a step heavier than its hand-off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")

import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402


class Threaded(SPECS.LinNumpy):  # type: ignore[misc,name-defined]
    def __init__(self, case: Any) -> None:
        super().__init__(case)
        self.pool = ThreadPoolExecutor(1)
        self.latest, self.done = self.w, self.w
        self.last_loss: Any = 0.0

    def honest_step(self) -> Any:
        loss = super().honest_step()
        self.latest = self.done = self.w
        return loss

    def _work(self) -> None:
        time.sleep(0.005)
        w = self.latest
        r = self.x @ w - self.y
        self.last_loss = 0.5 * (r * r).mean()
        self.latest = w - self.lr * (self.x.T @ r / len(r))
        self.w = self.done = self.latest

    def cheat(self) -> Any:
        self.pool.submit(self._work)
        return self.last_loss

    def params(self) -> dict[str, Any]:
        return {"w": self.done}


def build(case: Any) -> Any:
    return Threaded(case)
