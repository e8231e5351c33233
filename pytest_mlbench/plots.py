"""Charts of saved runs, written as PNG and SVG: a workload across frameworks and variants,
step time against feature dimension for a sweep (linreg), and machine against machine.

Each chart function returns a matplotlib ``Figure`` built without pyplot (no global state, no
display needed, the Agg canvas renders it), so tests can read its series before ``save``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from pytest_mlbench import compare
from pytest_mlbench.timing import Result


def save(fig: Figure, directory: Path | str, stem: str) -> list[Path]:
    """``<directory>/<stem>.png`` and ``.svg``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    for path in paths:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return paths


def bar_chart(results: Sequence[Result], group: str, reference: str | None = None) -> Figure:
    """One comparison group, fastest first, each bar labelled with its normalised time."""
    rows = sorted((r for r in results if r.group == group), key=lambda r: r.step_s)
    if not rows:
        raise ValueError(f"no results in group {group!r}")
    base = next((r.step_s for r in rows if r.impl == reference), rows[0].step_s)
    fig = Figure(figsize=(max(4.0, 1.1 * len(rows) + 1), 3.6))
    ax = fig.add_subplot()
    bars = ax.bar([r.impl for r in rows], [r.step_s * 1e3 for r in rows], label=group,
                  color="tab:blue")
    ax.bar_label(bars, labels=[f"{r.step_s / base:.2f}x" for r in rows], fontsize=8)
    ax.set_ylabel("step time (ms)")
    ax.set_title(f"{group}: training step, lower is better")
    ax.tick_params(axis="x", labelrotation=30)
    return fig


def sweep_series(run: compare.Run, workload: str = "linreg", axis: str = "d",
                 ) -> dict[str, list[tuple[int, float]]]:
    """``{impl: [(dimension, step seconds), ...]}`` from ``extra_info["dims"][axis]``."""
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for bench in run["benchmarks"]:
        info, result = bench.get("extra_info", {}), Result.from_benchmark(bench)
        if result is None or info.get("workload") != workload or axis not in info.get("dims", {}):
            continue
        impl = f"{result.impl} {info.get('precision', '')}".strip()
        series[impl].append((int(info["dims"][axis]), result.step_s))
    return {impl: sorted(points) for impl, points in sorted(series.items())}


def sweep_chart(run: compare.Run, workload: str = "linreg", axis: str = "d") -> Figure:
    """Step time against one dimension (log-log), one line per implementation."""
    series = sweep_series(run, workload, axis)
    if not series:
        raise ValueError(f"no {workload} benchmarks with extra_info dims[{axis!r}]")
    fig = Figure(figsize=(8.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    for impl, points in series.items():
        ax.plot([d for d, _ in points], [s * 1e3 for _, s in points], marker="o", label=impl)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"feature dimension {axis}")
    ax.set_ylabel("step time (ms)")
    ax.set_title(f"{workload}: step time against {axis}")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside, not over, the lines
    return fig


def machine_chart(runs: Sequence[tuple[str, compare.Run]], workload: str,
                  normalised: bool = False) -> Figure:
    """Grouped bars, one group per implementation, one bar per machine; ``normalised`` divides
    by each machine's control matmul time."""
    rows = compare.machine_rows(runs, workload)
    if not rows:
        raise ValueError(f"no {workload} results in the runs given")
    controls = {name: compare.control(run) for name, run in runs}
    keys = sorted(rows)
    width = 0.8 / len(runs)
    fig = Figure(figsize=(max(5.0, 1.2 * len(keys) + 2), 4.0))
    ax = fig.add_subplot()
    for i, (name, _) in enumerate(runs):
        ctl = controls[name]
        scale = (1 / ctl.seconds if ctl else float("nan")) if normalised else 1e3
        heights = [rows[k].get(name, float("nan")) * scale for k in keys]
        ax.bar([j + i * width for j in range(len(keys))], heights, width, label=name)
    ax.set_xticks([j + width * (len(runs) - 1) / 2 for j in range(len(keys))],
                  [impl if len({g for g, _ in keys}) == 1 else f"{g}\n{impl}" for g, impl in keys],
                  rotation=30, fontsize=8)
    ax.set_ylabel("step time (control matmuls)" if normalised else "step time (ms)")
    ax.set_title(f"{workload}: machine against machine")
    ax.legend(fontsize=8)
    return fig
