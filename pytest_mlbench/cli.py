"""``mlbench report`` (also ``python -m pytest_mlbench report``): saved runs as tables and charts.

    mlbench report RUN [--reference jax-jit]              one run, normalised to a reference
    mlbench report --machines RUN RUN ... --workload mlp  one workload across machines
    mlbench report --compare BASELINE RUN                 two runs, with the gate's statistics

RUN is a pytest-benchmark JSON file, a baseline name of this machine, or <machine-id>/<name>
under --baselines. ``--plots DIR`` also writes PNG and SVG charts. Exit status: 0, 1 when
--compare finds a slowdown that fails the gate, 2 for a usage error or unreadable file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_mlbench import compare, gate, report
from pytest_mlbench.baseline import BaselineError, load_run
from pytest_mlbench.options import OptionError, build_gate_settings


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="mlbench", description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="tables and charts of saved runs",
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         description=__doc__.split("\n\n", 1)[1])
    rep.add_argument("runs", nargs="+", metavar="RUN")
    mode = rep.add_mutually_exclusive_group()
    mode.add_argument("--machines", action="store_true", help="one workload across machines")
    mode.add_argument("--compare", action="store_true", help="BASELINE RUN with gate statistics")
    rep.add_argument("--reference", default=None,
                     help="implementation that sets 1.0, e.g. jax-jit. Default: the fastest")
    rep.add_argument("--workload", default="mlp", help="workload for --machines. Default: mlp")
    rep.add_argument("--threshold", default="10%", help="gate threshold. Default: 10%%")
    rep.add_argument("--alpha", default="0.01", help="gate significance level. Default: 0.01")
    rep.add_argument("--baselines", default="baselines",
                     help="folder that names resolve in. Default: baselines")
    rep.add_argument("--plots", type=Path, default=None, metavar="DIR",
                     help="also write PNG and SVG charts to DIR. Default: no charts")
    return top


def load(ref: str, baselines: str) -> tuple[Path, dict[str, Any]]:
    settings = build_gate_settings({"baselines": baselines})
    path = gate.storage(settings, Path.cwd()).resolve(ref)
    return path, load_run(path)


def one_run(args: argparse.Namespace, run: dict[str, Any]) -> list[str]:
    from pytest_mlbench import plots

    rows = compare.results(run)
    lines = report.normalised_table(rows, args.reference)
    ctl = compare.control(run)
    lines.append(f"control matmul: {ctl.gflops:.1f} GFLOP/s" if ctl else "control matmul: absent")
    if args.plots:
        for group in sorted({r.group for r in rows}):
            stem = "bars-" + group.replace(" ", "-")
            lines += map(str, plots.save(plots.bar_chart(rows, group, args.reference),
                                         args.plots, stem))
        if plots.sweep_series(run):
            lines += map(str, plots.save(plots.sweep_chart(run), args.plots, "linreg-sweep"))
    return lines


def machines(args: argparse.Namespace, runs: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    from pytest_mlbench import plots

    lines = compare.machines_table(runs, args.workload)
    if args.plots:
        for normalised, stem in ((False, "machines"), (True, "machines-normalised")):
            fig = plots.machine_chart(runs, args.workload, normalised)
            lines += map(str, plots.save(fig, args.plots, f"{stem}-{args.workload}"))
    return lines


def two_runs(args: argparse.Namespace, base: dict[str, Any], cur: dict[str, Any],
             ) -> tuple[list[str], bool]:
    settings = build_gate_settings({"gate-threshold": args.threshold, "gate-alpha": args.alpha})
    found = gate.compare_runs(base, cur, threshold=settings.threshold, alpha=settings.alpha)
    lines = gate.table(found) if found else []
    lines.append(gate.summary(found) if found else "mlbench gate: no benchmark to compare")
    if args.plots and found:
        from pytest_mlbench import plots

        runs = [("baseline", base), ("current", cur)]
        for workload in sorted({r.group.split(" ")[0].split("-")[0]
                                for r in compare.results(cur)}):
            fig = plots.machine_chart(runs, workload)
            lines += map(str, plots.save(fig, args.plots, f"compare-{workload}"))
    return lines, any(c.failed for c in found)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        loaded = [load(ref, args.baselines) for ref in args.runs]
        if args.compare and len(loaded) != 2:
            raise OptionError(f"--compare takes two runs, BASELINE and RUN; got {len(loaded)}")
        failed = False
        if args.compare:
            lines, failed = two_runs(args, loaded[0][1], loaded[1][1])
        elif args.machines:
            lines = machines(args, [(_label(p, r, loaded), r) for p, r in loaded])
        else:
            lines = [line for _, run in loaded for line in one_run(args, run)]
    except (BaselineError, OptionError, ValueError) as exc:
        print(f"mlbench: error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 1 if failed else 0


def _label(path: Path, run: dict[str, Any], loaded: Sequence[tuple[Path, Any]]) -> str:
    """The machine id, or the file stem when two runs share a machine id."""
    ids = [compare.label(r) for _, r in loaded]
    name = compare.label(run)
    return name if ids.count(name) == 1 else f"{name}:{path.stem}"
