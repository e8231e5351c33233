"""Generated histories of saved runs for the history page and ``report --steps`` tests.

A history is RUNS runs of CASES cases on one machine, each run a pytest-benchmark JSON file
written by the project's own writers (``Record.to_json`` into ``extra_info["mlbench"]``,
``BaselineStorage.save`` into ``<root>/<machine-id>/NNNN_main-RR.json``), with a commit id
and time a day apart. Every case's run draws its processes at random from a pool of
measures made at the case's level (``tests.synthetic.measure``: processes that differ by
~2%, rounds by ~3% within each, and a host that moves ~1% from run to run); one case may
step by ``size`` from run ``at`` on (runs counted from 1). The pool is what keeps this fast:
a measure's JSON (its interval bootstrapped, ~6 ms) is made once per pooled measure, and each
case's benchmark entry of it once, reused by every run (and history sharing the pools) that
draws it, so 40 x 90 records cost a second, not half a minute."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench.reporting import page
from pytest_mlbench.storing import fingerprint
from pytest_mlbench.storing.baselines import BaselineStorage
from pytest_mlbench.storing.record import Measure, Record
from tests.synthetic import MACHINE, bench, identity, measure, record, run_json
from tests.synthetic import write as write_run

IMPLS = ("jax-jit", "jax-eager", "torch-eager", "torch-jit", "numpy-eager", "tensorflow-xla")
WORKLOADS = ("mlp", "cnn", "gpt", "lstm", "vit")
PRECISIONS = ("fp32", "fp64", "bf16")
LEVELS = (2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2)  # seconds a step
POOL = 60  # measures pooled a level
START = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
RUNS, CASES = 40, 90
STEP_CASE, STEP_AT, STEP_SIZE = 37, 25, 0.15


@dataclass(frozen=True)
class Pooled(Measure):
    """A Measure whose JSON is made once (by Measure.to_json, unchanged) and then reused."""

    @cached_property
    def made(self) -> dict[str, Any]:
        return Measure.to_json(self)

    @cached_property
    def entries(self) -> dict[str, dict[str, Any]]:
        """Each case's benchmark entry of this measure, by the case's Record (measure-less)
        as repr gives it: made once, read by every run and history that draws it."""
        return {}

    def to_json(self) -> dict[str, Any]:
        return self.made

    def entry(self, rec: Record, key: str) -> dict[str, Any]:
        """``bench(rec.with_measure(self))``; ``key`` is ``repr(rec)``."""
        if key not in self.entries:
            self.entries[key] = bench(rec.with_measure(self))
        return self.entries[key]


def cases(count: int = CASES) -> list[tuple[str, str, str, str]]:
    """(workload, shape, impl, precision) of each case: every workload, impl and precision
    mixed; past 90 cases, more shapes of each (s1, s2, ...)."""
    grid = [(w, shape, i, p) for shape in ("", "s1", "s2", "s3") for p in PRECISIONS
            for w in WORKLOADS for i in IMPLS]
    if count > len(grid):
        raise ValueError(f"at most {len(grid)} cases")
    return grid[:count]


def pool(level: float, seed: int, runs_noise: float = 0.01) -> list[Pooled]:
    rng = np.random.default_rng(seed)
    made = []
    for _ in range(POOL):
        host = float(np.exp(runs_noise * rng.standard_normal()))
        m = measure(level * host, processes=3, rounds=8, seed=int(rng.integers(2**31)),
                    between=0.02, within=0.03)
        made.append(Pooled(m.steps_per_call, m.passes))
    return made


@dataclass
class History:
    root: Path
    machine: str
    labels: list[str]  # each case's series label ("mlp cpu fp32 jax-jit"), by case index


def pools(seed: int = 0) -> dict[float, list[Pooled]]:
    """Per level, POOL measures to draw runs from (several histories may share them: each
    draws its own runs)."""
    return {lv: pool(lv, seed * 100 + i) for i, lv in enumerate(LEVELS)}


def write(root: Path, *, seed: int = 0, step: bool = True, runs: int = RUNS,
          count: int = CASES, drawn_from: dict[float, list[Pooled]] | None = None,
          steps: tuple[tuple[int, int, float], ...] | None = None,
          checks: dict[str, Any] | None = None) -> History:
    """A history under ``root`` (a baselines folder); with ``step``, case STEP_CASE is
    STEP_SIZE slower from run STEP_AT on (``steps``: (case, run, size) of each step
    instead). Runs are drawn (seeded by ``seed``) from ``drawn_from``, else from pools of
    their own; ``checks`` go into every record (a real record's, for real sizes)."""
    rng = np.random.default_rng(seed)
    pools_ = drawn_from or pools(seed)
    chosen = cases(count)
    level = [LEVELS[i % len(LEVELS)] for i in range(count)]
    steps = steps if steps is not None else ((STEP_CASE, STEP_AT, STEP_SIZE),) if step else ()
    stepped = {c: (at, pool(level[c] * (1 + size), seed * 100 + 99 + c)) for c, at, size in steps}
    store = BaselineStorage(root, fingerprint.machine_id({"mlbench": MACHINE}))
    records = [_record(*case, checks or {}) for case in chosen]
    keys = [repr(rec) for rec in records]  # a case's entries, kept on each pooled measure
    for r in range(runs):
        benches = []
        for c, rec in enumerate(records):
            k = int(rng.integers(POOL))
            drawn = (stepped[c][1] if c in stepped and r + 1 >= stepped[c][0]
                     else pools_[level[c]])[k]
            benches.append(drawn.entry(rec, keys[c]))
        store.save(json.dumps(_run(benches, r)).encode(), f"main-{r + 1:02d}")
    return History(root, store.machine_id,
                   [f"{rec.identity.group} {rec.identity.impl}" for rec in records])


def _record(workload: str, shape: str, impl: str, precision: str,
            checks: dict[str, Any]) -> Record:
    head = f"{workload}-{shape}" if shape else workload
    ident = identity(impl, workload=workload, head=head, shape=shape, precision=precision,
                     dtype={"fp32": "float32", "fp64": "float64", "bf16": "bfloat16"}[precision])
    return Record(ident, f"{head}-{impl}-cpu-{precision}", checks=checks)


def _run(benches: list[dict[str, Any]], r: int) -> dict[str, Any]:
    when = START + timedelta(days=r)
    return {"machine_info": {"python_version": "3.11.0", "mlbench": dict(MACHINE)},
            "commit_info": {"id": hashlib.sha1(f"commit {r}".encode()).hexdigest(),
                            "time": when.isoformat(), "author_time": when.isoformat(),
                            "dirty": False, "project": "example", "branch": "main"},
            "benchmarks": benches, "datetime": (when + timedelta(hours=1)).isoformat(),
            "version": "5.3.1"}


# -- for the tests of the history and its page -------------------------------------------

@dataclass(frozen=True)
class Built:
    status: int
    out: str
    site: Path


def data_of(folder: Path) -> dict[str, Any]:
    text = (folder / page.DATA).read_text()
    assert text.startswith("window.MLBENCH = ") and text.endswith(";\n")
    return json.loads(text[len("window.MLBENCH = "):-2])


def two_machines(folder: Path) -> Path:
    """Six runs of two cases on each of two machines (the second twice as fast)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, scale in (("A", 1.0), ("B", 0.5)):
        machine = {**MACHINE, "cpu": {**MACHINE["cpu"], "model": f"CPU {name}"}}
        for r in range(6):
            run = run_json(*(bench(record(impl, 1e-3 * scale * (1 + i), measure_kw={
                "seed": 10 * r + i, "processes": 3})) for i, impl in enumerate(
                    ("jax-jit", "torch-eager"))), machine=machine)
            run["commit_info"] = {"id": f"{r:x}" * 40, "time": f"2026-10-0{r + 1}T00:00:00"}
            write_run(folder / f"{name}{r}.json", run)
    return folder
