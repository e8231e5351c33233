"""Charts of saved runs, written as PNG and SVG: a group across implementations, step time
against a dimension for a sweep (linreg), and machine against machine. Every bar and point
carries the interval of its estimate (the next run's, at stats.PREDICTION) as an error bar.

Each chart function returns a matplotlib ``Figure`` built without pyplot (no global state, no
display needed, the Agg canvas renders it), so tests can read its series before ``save``.
This module needs matplotlib (the ``report`` extra); cli.py skips charts when it is missing."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from pytest_mlbench import stats
from pytest_mlbench.reporting import machines
from pytest_mlbench.storing.record import Record, run_prior


def save(fig: Figure, directory: Path | str, stem: str) -> list[Path]:
    """``<directory>/<stem>.png`` and ``.svg``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    for path in paths:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return paths


def errors(estimates: Sequence[stats.Estimate | None], scale: float) -> list[list[float]]:
    """matplotlib's ``yerr``: distances below and above each value, 0 where there is none."""
    low = [(e.value - e.low) * scale if e else 0.0 for e in estimates]
    high = [(e.high - e.value) * scale if e else 0.0 for e in estimates]
    return [low, high]


def bar_chart(records: Sequence[Record], group: str, reference: str | None = None) -> Figure:
    """One comparison group, fastest first, each bar labelled with its normalised time."""
    prior = run_prior(r.measure for r in records)  # the table's intervals, moderated alike
    rows = sorted(((r, r.measure.estimate(prior)) for r in records
                   if r.identity.group == group and r.measure is not None),
                  key=lambda re: re[1].value)
    if not rows:
        raise ValueError(f"no measured records in group {group!r}")
    base = next((e.value for r, e in rows if r.identity.impl == reference), rows[0][1].value)
    fig = Figure(figsize=(max(4.0, 1.1 * len(rows) + 1), 3.6))
    ax = fig.add_subplot()
    ests = [e for _, e in rows]
    bars = ax.bar([r.identity.impl for r, _ in rows], [e.value * 1e3 for e in ests],
                  yerr=errors(ests, 1e3), capsize=3, label=group, color="tab:blue")
    ax.bar_label(bars, labels=[f"{e.value / base:.2f}x" for e in ests], fontsize=8)
    ax.set_ylabel("step time (ms)")
    ax.set_title(f"{group}: lower is better")
    ax.tick_params(axis="x", labelrotation=30)
    return fig


def sweep_series(records: Sequence[Record], workload: str = "linreg", axis: str = "d",
                 ) -> dict[str, list[tuple[int, stats.Estimate]]]:
    """``{impl precision: [(dimension, step estimate), ...]}`` from ``Identity.dims[axis]``."""
    series: dict[str, list[tuple[int, stats.Estimate]]] = defaultdict(list)
    prior = run_prior(r.measure for r in records)
    for r in records:
        ident = r.identity
        if r.measure is None or ident.workload != workload or axis not in ident.dims:
            continue
        series[f"{ident.impl} {ident.precision}"].append((ident.dims[axis],
                                                          r.measure.estimate(prior)))
    return {impl: sorted(points, key=lambda p: p[0]) for impl, points in sorted(series.items())}


def sweep_chart(records: Sequence[Record], workload: str = "linreg", axis: str = "d") -> Figure:
    """Step time against one dimension (log-log), one line per implementation."""
    series = sweep_series(records, workload, axis)
    if not series:
        raise ValueError(f"no {workload} records with dims[{axis!r}]")
    fig = Figure(figsize=(8.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    for impl, points in series.items():
        ests = [e for _, e in points]
        ax.errorbar([d for d, _ in points], [e.value * 1e3 for e in ests],
                    yerr=errors(ests, 1e3), marker="o", capsize=3, label=impl)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"feature dimension {axis}")
    ax.set_ylabel("step time (ms)")
    ax.set_title(f"{workload}: step time against {axis}")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the lines
    return fig


def machine_chart(runs: machines.Named, workload: str, normalised: bool = False) -> Figure:
    """Grouped bars, one group per row of compare.machine_rows, one bar per run;
    ``normalised`` divides by each run's control matmul time."""
    rows = machines.machine_rows(runs, workload)
    if not rows:
        raise ValueError(f"no {workload} results in the runs given")
    controls = {name: machines.control(run) for name, run in runs}
    priors = {name: run_prior(r.measure for _, r in run.cases) for name, run in runs}
    keys = list(rows)
    width = 0.8 / len(runs)
    fig = Figure(figsize=(max(5.0, 1.2 * len(keys) + 2), 4.0))
    ax = fig.add_subplot()
    for i, (name, _) in enumerate(runs):
        ctl = controls[name]
        scale = (1 / ctl.seconds if ctl else float("nan")) if normalised else 1e3
        ests = [rows[k][name].estimate(priors[name]) if name in rows[k] else None for k in keys]
        heights = [e.value * scale if e else float("nan") for e in ests]
        ax.bar([j + i * width for j in range(len(keys))], heights, width,
               yerr=errors(ests, scale), capsize=2, label=name)
    ax.set_xticks([j + width * (len(runs) - 1) / 2 for j in range(len(keys))],
                  [k.replace(" ", "\n", 3) for k in keys], rotation=30, fontsize=7)
    ax.set_ylabel("step time (control matmuls)" if normalised else "step time (ms)")
    ax.set_title(f"{workload}: machine against machine")
    ax.legend(fontsize=8)
    return fig
