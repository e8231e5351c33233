"""A pytest plugin that makes every training step slower by a fraction, for calibrating the gate
(tools/calibrate_gate.py). Load it with ``-p mlbench_slowdown`` (tools/ on PYTHONPATH) and set
``MLBENCH_SLOWDOWN=0.2`` for steps 20% slower.

No workload is edited: it wraps ``catalogue.implementation`` so each built trainer's ``step``
runs the real step, synchronises it, then busy-waits ``MLBENCH_SLOWDOWN`` times the time that
took. Busy-waiting (not sleeping) keeps a core occupied, as real extra work would."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from pytest_mlbench import catalogue


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class SlowTrainer:
    def __init__(self, inner: Any, adapter: Any, factor: float) -> None:
        self.inner, self.adapter, self.factor = inner, adapter, factor

    def params(self) -> Any:
        return self.inner.params()

    def loss_and_grads(self) -> Any:
        return self.inner.loss_and_grads()

    def step(self) -> Any:
        start = time.perf_counter()
        out = self.inner.step()
        self.adapter.sync((out, self.inner.params()))
        spin(self.factor * (time.perf_counter() - start))
        return out


class SlowImplementation:
    def __init__(self, module: Any, factor: float) -> None:
        self.module, self.factor = module, factor

    def build(self, case: Any) -> SlowTrainer:
        return SlowTrainer(self.module.build(case), case.adapter, self.factor)


def pytest_configure(config: pytest.Config) -> None:
    factor = float(os.environ.get("MLBENCH_SLOWDOWN", "0"))
    if factor <= 0:
        return
    original = catalogue.implementation

    def slowed(*args: Any, **kwargs: Any) -> SlowImplementation:
        return SlowImplementation(original(*args, **kwargs), factor)

    catalogue.implementation = slowed  # type: ignore[assignment]
