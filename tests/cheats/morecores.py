"""What the cheaters that take more cores than the session gave share (issue 56): the seed MLP at
a batch where a second core pays (MLP_BATCH), its honest NumPy trainer stepping each half of a
batch apart, and a thread's CPU affinity set through libc (past os.sched_setaffinity, which
the worker watches while timed).

Each cheater's folder beside this file holds its spec.py and implementation; the session copies
this folder with them (cheat_session.py), and they load this file with load_suite_file."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parent / "specs.py")
MLP_BATCH = 1024  # 67 MFLOP a step, milliseconds on one core: matmuls a second core splits
Half = Callable[[dict[str, np.ndarray], dict[str, np.ndarray]], Any]


def every_core() -> set[int]:
    """Every core of the host, past the one the session gave the worker."""
    return set(range(os.cpu_count() or 1))


def set_affinity_through_libc(cores: set[int]) -> None:
    """The calling thread's CPU affinity set by libc's sched_setaffinity (not Python's)."""
    mask = (ctypes.c_ulong * 16)()
    for core in cores:
        mask[core // 64] |= 1 << (core % 64)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.sched_setaffinity(0, ctypes.sizeof(mask), ctypes.byref(mask)) != 0:
        raise OSError(ctypes.get_errno(), "sched_setaffinity")


def honest_numpy() -> Any:
    return SPECS.honest("mlp", "numpy")


class HalvesElsewhere:
    """The honest NumPy trainer, whose steps after the checked ones compute the first half of
    the batch here and the second through ``elsewhere(params, half)`` (a thread or a process
    of a pool, which returns the half's loss and gradient): the mean of two equal halves' mean
    losses and gradients is the batch's, so every audit reads the honest step."""

    def __init__(self, case: Any, elsewhere: Callable[[dict[str, Any], dict[str, Any]], Any]):
        self.inner = honest_numpy().build(case)
        self.elsewhere, self.calls = elsewhere, 0
        self.params, self.loss_and_grads = self.inner.params, self.inner.loss_and_grads

    def step(self) -> Any:
        self.calls += 1
        inner = self.inner
        if self.calls <= SPECS.CHECKED:
            return inner.step()
        batch = inner.batch()
        n = len(batch["x"]) // 2
        there = self.elsewhere(inner.params(), {k: v[n:] for k, v in batch.items()})
        loss, grads = honest_numpy().value_and_grad(inner.params(),
                                                    {k: v[:n] for k, v in batch.items()})
        other_loss, other = there.result() if hasattr(there, "result") else there.get()
        inner.w1 -= inner.lr * (grads["w1"] + other["w1"]) / 2
        inner.w2 -= inner.lr * (grads["w2"] + other["w2"]) / 2
        return (loss + other_loss) / 2
