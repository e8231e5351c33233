"""Saved runs side by side: one workload across machines, raw and normalised by the control
benchmark (suites/test_control.py), so a slower machine is told from a slower framework."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_mlbench import fingerprint
from pytest_mlbench.timing import Result

Run = Mapping[str, Any]


@dataclass(frozen=True)
class Control:
    seconds: float  # median of one 512x512 float32 matmul
    gflops: float


def results(run: Run) -> list[Result]:
    """The training-step Results of one saved run."""
    out = (Result.from_benchmark(bench) for bench in run["benchmarks"])
    return [r for r in out if r is not None]


def control(run: Run) -> Control | None:
    for bench in run["benchmarks"]:
        info = bench.get("extra_info", {})
        if info.get("control") == "matmul":
            seconds = float(bench["stats"]["median"])
            return Control(seconds, info["flops_per_step"] / seconds / 1e9)
    return None


def label(run: Run) -> str:
    return fingerprint.machine_id(run.get("machine_info", {}))


def of_workload(rows: Sequence[Result], workload: str) -> list[Result]:
    """Results of ``workload``'s groups (``mlp cpu fp32``, ``linreg-d10 cpu fp32``)."""
    return [r for r in rows if r.group.split(" ")[0].split("-")[0] == workload]


def machine_rows(runs: Sequence[tuple[str, Run]], workload: str,
                 ) -> dict[tuple[str, str], dict[str, float]]:
    """``{(group, impl): {machine: step seconds}}`` for one workload across machines."""
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for name, run in runs:
        for r in of_workload(results(run), workload):
            rows.setdefault((r.group, r.impl), {})[name] = r.step_s
    return rows


def machines_table(runs: Sequence[tuple[str, Run]], workload: str) -> list[str]:
    """Step time in ms per machine, and in control matmuls (step / control time), which stays
    put when a machine is uniformly faster and moves when a framework is."""
    controls = {name: control(run) for name, run in runs}
    names = [name for name, _ in runs]
    width = max([len(n) for n in names] + [18])
    head = f"  {'group / implementation':<34}" + "".join(f" {n:>{width}}" for n in names)
    lines = [f"{workload}: step time (ms) | in control matmuls", head,
             f"  {'control GFLOP/s':<34}" + "".join(
                 f" {(f'{c.gflops:.1f}' if c else 'no control'):>{width}}"
                 for c in controls.values())]
    for (group, impl), by_machine in sorted(machine_rows(runs, workload).items()):
        cells = []
        for name in names:
            step, ctl = by_machine.get(name), controls[name]
            raw = f"{step * 1e3:.4f}" if step is not None else "-"
            norm = f"{step / ctl.seconds:.3f}" if step is not None and ctl else "-"
            cells.append(f" {raw + ' | ' + norm:>{width}}")
        lines.append(f"  {group + ' ' + impl:<34}" + "".join(cells))
    return lines
