"""How fast the host runs a fixed piece of work, measured at the start of every timed pass.

A shared host drifts: its neighbours, its clock and its caches change over minutes, and a
run half an hour later can find the interpreter 10% slower while large BLAS kernels barely
move. The processes of one run are spread over time so that such drift hits every
implementation alike within the run, but nothing inside a run can undo a change between two
runs, and it moves dispatch-bound (eager, Python-heavy) implementations more than
kernel-bound ones. This cannot be controlled from here, so it is shown: before each pass
starts its workers (nothing else of the campaign runs then), the campaign times three fixed
pieces of work in its own process: a pure-Python loop that stays in the core's caches (what
eager dispatch leans on), a one-thread float32 matmul (what kernels lean on), and a Python walk
through a table twice the reference host's last-level cache, each step a load from memory
(what a neighbour's cache and memory traffic slows: a large model's dispatch-heavy step need
not fit in the caches either, while the loop does). The figures go into the run's
``machine_info["mlbench"]["host_probe"]`` (never into the machine's id) and under the
normalised table; ``tools/reproducibility.py`` sets them side by side across runs.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

REPEATS = 7  # timings a probe takes per pass; its figure is their median
LOOP_N = 100_000  # about 5 ms of CPython
MATMUL_N, MATMUL_CALLS = 192, 8  # about 1 ms on one AVX2 core
# 64 MB of int64, past the last-level cache of most hosts (32 MB on the reference one); its
# order is a full-period affine map modulo a power of two, so that the next address is never
# the one a prefetcher would guess; 20,000 steps are about 5 ms here (a NumPy index and a
# load from memory each)
WALK_BITS, WALK_STEPS = 23, 20_000
WALK_A, WALK_C = 6_364_136_223_846_793_005 % (1 << 23), 1_442_695_040_888_963_407 % (1 << 23)

# a probe whose slowest pass is this much slower than its fastest says the host itself changed
# speed within the run (on the reference host: 5% in a quiet hour, 70% with a busy neighbour)
HOST_SWING = 0.25

LABELS = {"interpreter_ms": "Python loop", "kernel_ms": "one-thread matmul",
          "memory_ms": "memory walk"}
PROBES = tuple(LABELS)


def _loop() -> int:
    total = 0
    for i in range(LOOP_N):
        total += (i * i) % 7
    return total


def _kernel(a: np.ndarray, b: np.ndarray) -> Callable[[], object]:
    def run() -> object:
        out = a
        for _ in range(MATMUL_CALLS):
            out = (out @ b) * np.float32(0.5)
        return out
    return run


def _walk() -> Callable[[], object]:
    """Follow ``next = table[here]`` from 0: every step a dependent load from memory."""
    n = 1 << WALK_BITS
    table = (WALK_A * np.arange(n, dtype=np.int64) + WALK_C) % n

    def run() -> object:
        here = 0
        for _ in range(WALK_STEPS):
            here = int(table[here])
        return here
    return run


def _median_ms(work: Callable[[], object], repeats: int) -> float:
    work()  # warm: first call pays allocation and caches
    times = []
    for _ in range(repeats):
        begun = time.perf_counter()
        work()
        times.append(time.perf_counter() - begun)
    return statistics.median(times) * 1e3


def measure(repeats: int = REPEATS) -> dict[str, float]:
    """One reading of every probe, in milliseconds (the caller limits BLAS to one thread)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((MATMUL_N, MATMUL_N), dtype=np.float32)
    b = rng.standard_normal((MATMUL_N, MATMUL_N), dtype=np.float32) / np.float32(MATMUL_N)
    return {"interpreter_ms": _median_ms(_loop, repeats),
            "kernel_ms": _median_ms(_kernel(a, b), repeats),
            "memory_ms": _median_ms(_walk(), repeats)}


def loop_ms(repeats: int = 5) -> float:
    """The Python-loop probe alone (about 30 ms): what a job's estimate scales by."""
    return _median_ms(_loop, repeats)


@dataclass
class HostProbe:
    """One reading per timed pass, in the order taken."""

    readings: list[dict[str, float]] = field(default_factory=list)

    def take(self) -> None:
        self.readings.append(measure())

    def to_json(self) -> dict[str, Any]:
        return {name: [round(r[name], 4) for r in self.readings] for name in PROBES}


def readings(probe: Mapping[str, Sequence[float]]) -> dict[str, list[float]]:
    """Each probe's readings over the passes of one run; probes a run did not record (an
    older run, an untimed one) are left out, and so is anything that is not a number."""
    out = {}
    for name in PROBES:
        found = probe.get(name)
        values = [float(v) for v in found if isinstance(v, (int, float))] \
            if isinstance(found, Sequence) and not isinstance(found, str) else []
        if values:
            out[name] = values
    return out


def summary(probe: Mapping[str, Sequence[float]]) -> dict[str, tuple[float, float, float]]:
    """``{probe: (median, smallest, largest)}`` over the passes of one run (see readings)."""
    return {name: (statistics.median(values), min(values), max(values))
            for name, values in readings(probe).items()}


def of_run(machine_info: Mapping[str, Any]) -> Mapping[str, Sequence[float]]:
    """The probe a run's JSON recorded (empty when it has none)."""
    info = machine_info.get("mlbench") if isinstance(machine_info, Mapping) else None
    found = info.get("host_probe") if isinstance(info, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def line(probe: Mapping[str, Sequence[float]]) -> str | None:
    """One line for the terminal: each probe's median and range over the passes."""
    found = readings(probe)
    if not found:
        return None
    passes = max(len(values) for values in found.values())
    parts = [f"{LABELS[name]} {statistics.median(values):.2f} ms "
             f"({min(values):.2f}-{max(values):.2f})" for name, values in found.items()]
    return (f"host probe before each of {passes} process(es): " + ", ".join(parts)
            + "; a change here between runs moves eager (dispatch-bound) figures most"
            + (f"; {note}" if (note := swing(probe)) else ""))


def swing(probe: Mapping[str, Sequence[float]]) -> str:
    """A note when some probe's slowest pass was more than HOST_SWING slower than its fastest:
    the host changed speed under this run, which a slow host does not do to every
    implementation alike (dispatch-bound steps slow most), so even its paired ratios may not
    repeat; empty otherwise."""
    found = readings(probe)
    name, value = max(((n, max(v) / min(v) - 1) for n, v in found.items() if min(v) > 0),
                      key=lambda item: item[1], default=("", 0.0))
    if value <= HOST_SWING:
        return ""
    return (f"the host changed speed during this run ({LABELS[name]} {value:.0%} slower in "
            f"its slowest process than its fastest): a repeat run's ratios may not hold")


def drift(first: Mapping[str, Sequence[float]], other: Mapping[str, Sequence[float]]) -> str:
    """A note when some probe's median in ``other`` (a later run) differs from ``first``'s by
    more than HOST_SWING: the host ran at another speed between the runs, and ratios of
    dispatch-bound implementations move with it; empty otherwise (or without both probes)."""
    one, two = summary(first), summary(other)
    changes = [(name, two[name][0] / one[name][0] - 1) for name in one
               if name in two and one[name][0] > 0]
    name, value = max(changes, key=lambda item: abs(item[1]), default=("", 0.0))
    if abs(value) <= HOST_SWING:
        return ""
    return (f"the host ran at another speed than in run 1 ({LABELS[name]} {abs(value):.0%} "
            f"{'slower' if value > 0 else 'faster'}): ratios of dispatch-bound "
            "implementations move with it")
