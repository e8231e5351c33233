"""Saved runs side by side: a workload across machines, raw and normalised by the control
benchmark (suites/test_control.py), so a slower machine is told from a slower framework.

Rows are identities without the thread count (machines differ in cores, and the plugin uses
them all): the same case at another size is another row, never a cell of this one."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_mlbench import tables
from pytest_mlbench.judging import regression
from pytest_mlbench.storing import fingerprint
from pytest_mlbench.storing.record import Identity, Measure
from pytest_mlbench.storing.runs import BaselineError, Entry, Run

Named = Sequence[tuple[str, Run]]


@dataclass(frozen=True)
class Control:
    seconds: float  # one 512x512 float32 matmul
    gflops: float


def control(run: Run) -> Control | None:
    """The run's control matmul: an mlbench record of workload ``control``, or the plain
    benchmark whose extra_info says ``control: matmul`` (pytest-mlbench 0.1)."""
    for entry in run.entries:
        rec = entry.record
        if rec is not None and regression.is_control(rec) and rec.measure is not None \
                and rec.measure.flops_per_step:
            seconds = rec.measure.step_s
            return Control(seconds, rec.measure.flops_per_step / seconds / 1e9)
        if rec is None and (entry.bench.get("extra_info") or {}).get("control") == "matmul":
            return _plain_control(run, entry)
    return None


def _plain_control(run: Run, entry: Entry) -> Control:
    stats: Mapping[str, Any] = entry.bench["stats"]  # checked by storing/runs.py: an object
    data = sorted(stats.get("data") or [])
    seconds = _positive(data[len(data) // 2] if data else stats.get("median"))
    flops = _positive(entry.bench["extra_info"].get("flops_per_step"))
    if seconds is None or flops is None:
        raise BaselineError(f"{run.where}: control benchmark {entry.fullname!r}: its median "
                            "and flops_per_step must be positive numbers")
    return Control(seconds, flops / seconds / 1e9)


def _positive(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok and value > 0 else None


def label(run: Run) -> str:
    return fingerprint.machine_id(run.machine_info)


def workloads(runs: Named) -> list[str]:
    return sorted({rec.identity.workload for _, run in runs for _, rec in run.cases
                   if not regression.is_control(rec) and rec.measure is not None})


def machine_rows(runs: Named, workload: str) -> dict[str, dict[str, Measure]]:
    """``{row label: {machine: measure}}`` for one workload; labels carry the dims when the
    same group and implementation appear at more than one size."""
    rows: dict[tuple[Any, ...], tuple[Identity, dict[str, Measure]]] = {}
    for name, run in runs:
        for _, rec in run.cases:
            ident = rec.identity
            if rec.measure is None or ident.workload != workload or regression.is_control(rec):
                continue
            key = replace(ident, threads=None).key
            rows.setdefault(key, (ident, {}))[1][name] = rec.measure
    plain = [f"{ident.group} {ident.impl}" for ident, _ in rows.values()]
    out = {}
    for (ident, by_machine), text in zip(rows.values(), plain, strict=True):
        if plain.count(text) > 1:  # same case, other sizes (or digests): say which
            dims = ",".join(f"{k}={v}" for k, v in sorted(ident.dims.items()))
            text = f"{text} [{dims or ident.data_sha256[:8]}]"
        out[text] = by_machine
    return dict(sorted(out.items()))


def machines_table(runs: Named, workload: str) -> list[str]:
    """Step time in ms per machine, and in control matmuls (step / control time), which stays
    put when a machine is uniformly faster and moves when a framework is."""
    controls = {name: control(run) for name, run in runs}
    names = [name for name, _ in runs]
    body = [["control GFLOP/s", *[f"{c.gflops:.1f}" if c else "no control"
                                  for c in controls.values()]]]
    for text, by_machine in machine_rows(runs, workload).items():
        body.append([text, *[_cell(by_machine.get(n), controls[n]) for n in names]])
    return [f"{workload}: step time (ms) | in control matmuls",
            *tables.render(["group / implementation", *names], body, indent="  ")]


def _cell(measure: Measure | None, ctl: Control | None) -> str:
    if measure is None:
        return "-"
    step = measure.step_s
    return f"{step * 1e3:.4f} | " + (f"{step / ctl.seconds:.3f}" if ctl else "-")
