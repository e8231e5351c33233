"""``pytest-mlbench report`` (also ``python -m pytest_mlbench report``): saved runs as tables
and charts.

    pytest-mlbench report RUN [--reference jax-jit] [--processes] one run, normalised to a reference
    pytest-mlbench report RUN --time                              where the run's seconds went
    pytest-mlbench report --machines RUN RUN ... [--workload mlp]  workloads across machines
    pytest-mlbench report --compare BASELINE RUN                 two runs, judged like the gate
    pytest-mlbench report --html DIR RUN ... [--steps]           many runs' history as a page
    pytest-mlbench report --steps RUN ...                        steps in each case's history

RUN is a pytest-benchmark JSON file, a baseline name of this machine, or <machine-id>/<name>
under --baselines (add .partial to name a partial run); with --html or --steps also a folder
of runs (a whole baselines/ tree, partial runs left out). ``--plots DIR`` also writes PNG and
SVG charts (needs matplotlib: pip install 'pytest-mlbench[report]'; without it tables still
print). Exit status: 0; 1 when --compare finds a slowdown that fails the gate or judges
nothing, or when --steps lists a step; 2 for a usage error, a file that cannot be read or
trusted, or a run with no pytest-mlbench case to report."""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import ModuleType

from pytest_mlbench import __version__, timesheet
from pytest_mlbench.judging import regression, sessions
from pytest_mlbench.measuring import hostspeed
from pytest_mlbench.options import OptionError, build_gate_settings, parse_alpha, parse_percent
from pytest_mlbench.reporting import machines as compare
from pytest_mlbench.reporting import mfu, scaling
from pytest_mlbench.reporting import normalised as report
from pytest_mlbench.storing import compile_cache, fingerprint
from pytest_mlbench.storing.baselines import BaselineError, is_explicit, resolve_anywhere
from pytest_mlbench.storing.runs import Run, load_run

PROG = "pytest-mlbench"
EXTRA = "pip install 'pytest-mlbench[report]'"
Lines = list[str]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    top.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = top.add_subparsers(dest="command", required=True)
    compile_cache.add_command(sub)  # pytest-mlbench cache [clear]: storing/compile_cache.py
    rep = sub.add_parser("report", help="tables and charts of saved runs",
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         description=__doc__.split("\n\n", 1)[1])
    rep.add_argument("runs", nargs="+", metavar="RUN")
    mode = rep.add_mutually_exclusive_group()
    mode.add_argument("--machines", action="store_true", help="workloads across machines")
    mode.add_argument("--compare", action="store_true", help="BASELINE RUN, judged like the gate")
    rep.add_argument("--reference", default=None,
                     help="implementation that sets 1.0, e.g. jax-jit. Default: the fastest")
    rep.add_argument("--workload", default=None,
                     help="the workload for --machines. Default: every workload in the runs")
    rep.add_argument("--threshold", default="10%",
                     help="gate threshold for --compare, with %%. Default: 10%%")
    rep.add_argument("--alpha", default="0.01", help="gate significance level. Default: 0.01")
    rep.add_argument("--baselines", default="baselines",
                     help="folder that names resolve in. Default: baselines")
    rep.add_argument("--time", action="store_true",
                     help="where the run's seconds went: per pass and framework, each activity "
                          "(worker start, compilation, references, checks, timed rounds, ...)")
    rep.add_argument("--processes", action="store_true",
                     help="one run: also each implementation's median step in each process, "
                          "in the order they ran, and the host probe before each")
    rep.add_argument("--plots", type=Path, default=None, metavar="DIR",
                     help="also write PNG and SVG charts to DIR. Default: no charts")
    rep.add_argument("--html", type=Path, default=None, metavar="DIR",
                     help="write the runs' history as a page to DIR (new, empty, or a page "
                          "written before), opened from the file system with no network")
    rep.add_argument("--steps", action="store_true",
                     help="list the steps in each case's history (exit 1 when there is one); "
                          "--alpha: the chance a history with no step lists one, --threshold: "
                          "the smallest step listed")
    ini = sub.add_parser("init", help="set the plugin up in your own project: the ini setting, "
                                      "the suites folder's test file and an example workload")
    ini.add_argument("root", nargs="?", type=Path, default=Path("."),
                     help="the project's root folder. Default: the current folder")
    ini.add_argument("--suites", default="benchmarks",
                     help="the folder of workload folders, inside the project. Default: benchmarks")
    ini.add_argument("--example", action="append", default=[], metavar="NAME",
                     help="copy this shipped workload (cnn, gpt, lstm, mlp, vit, ...) into the "
                          "suites folder, with the folder it reuses; repeat for more. Default: "
                          "example, a least-squares workload in NumPy")
    return top


def init(args: argparse.Namespace) -> int:
    from pytest_mlbench import scaffold

    try:
        lines = scaffold.init(args.root, args.suites, args.example)
    except scaffold.InitError as exc:
        print(f"{PROG} init: error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


def load(ref: str, baselines: str) -> Run:
    """RUN: a file, a name of this machine, or <machine-id>/<name> under --baselines, else
    among the baselines this package ships (storing/baselines.py)."""
    settings = build_gate_settings({"baselines": baselines})
    return load_run(resolve_anywhere(sessions.storage(settings, Path.cwd()), ref))


def plots_module() -> ModuleType | None:
    """pytest_mlbench.reporting.plots, or None when matplotlib is missing (tables print without it)."""
    try:
        return importlib.import_module("pytest_mlbench.reporting.plots")
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "matplotlib":
            raise
        return None


def one_run(args: argparse.Namespace, run: Run, plots: ModuleType | None) -> Lines:
    records = [rec for _, rec in run.cases]
    impls = sorted({r.identity.impl for r in records if r.measure is not None})
    if args.reference and args.reference not in impls:
        raise OptionError(f"--reference {args.reference!r}: no such implementation in "
                          f"{run.where}; available: {', '.join(impls) or 'none'}")
    lines = [f"{run.where} (partial run)" if run.partial else run.where,
             *report.normalised_table(records, args.reference)]
    ctl = compare.control(run)
    lines.append(f"control matmul: {ctl.gflops:.1f} GFLOP/s" if ctl else "control matmul: absent")
    if probe := hostspeed.line(hostspeed.of_run(run.machine_info)):
        lines.append(probe)
    if args.processes:
        lines += report.process_table(records, hostspeed.of_run(run.machine_info))
    if table := mfu.mfu_table(records, mfu.gpu_name(run.machine_info)):
        lines += ["", "model FLOPs utilisation (GPU cases):", *table, mfu.legend()]
    if table := scaling.scaling_table(records):
        lines += ["", "parallel strategies, scaling:", *table, scaling.legend()]
    if args.time:
        lines += time_spent(run)
    if plots is not None:
        for group in sorted({r.identity.group for r in records if r.measure is not None}):
            fig = plots.bar_chart(records, group, args.reference)
            lines += map(str, plots.save(fig, args.plots, "bars-" + group.replace(" ", "-")))
        if plots.sweep_series(records):
            lines += map(str, plots.save(plots.sweep_chart(records), args.plots, "linreg-sweep"))
    return lines


def time_spent(run: Run) -> Lines:
    """The run's timesheet (machine_info.mlbench.time_spent), or why there is none."""
    mine = run.machine_info.get("mlbench") or {}
    spent = mine.get("time_spent") if isinstance(mine, dict) else None
    if not isinstance(spent, dict) or not isinstance(spent.get("passes"), list):
        return ["where the time went: not recorded in this run (saved before runs kept it)"]
    try:
        if empty := timesheet.empty_passes(spent):
            raise BaselineError(f"{run.where}: machine_info.mlbench.time_spent: pass "
                                f"{', '.join(map(str, empty))} recorded no seconds (no activity, "
                                "no phase), which a session's sheet never holds: the sheet "
                                "was cut or edited; nothing to show")
        return ["", "where the time went (seconds):", *timesheet.lines(spent)]
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise BaselineError(f"{run.where}: machine_info.mlbench.time_spent is malformed "
                            f"({exc}): it should be a timesheet's JSON") from None


def chosen_workloads(args: argparse.Namespace, runs: compare.Named) -> list[str]:
    found = compare.workloads(runs)
    if args.workload is None:
        return found
    if args.workload not in found:
        raise OptionError(f"--workload {args.workload!r}: not in the runs given; available: "
                          f"{', '.join(found) or 'none'}")
    return [args.workload]


def machines(args: argparse.Namespace, runs: compare.Named, plots: ModuleType | None) -> Lines:
    lines: Lines = []
    for workload in chosen_workloads(args, runs):
        lines += compare.machines_table(runs, workload)
        if plots is not None:
            for normalised, stem in ((False, "machines"), (True, "machines-normalised")):
                fig = plots.machine_chart(runs, workload, normalised)
                lines += map(str, plots.save(fig, args.plots, f"{stem}-{workload}"))
    return lines


def two_runs(limits: tuple[float, float], args: argparse.Namespace, base: Run, cur: Run,
             plots: ModuleType | None) -> tuple[Lines, int]:
    if base.partial and not is_explicit(args.runs[0]):
        raise BaselineError(f"{base.where}: a partial run (saved from an interrupted or failed "
                            "session); name the file to compare against it anyway")
    found = regression.judge(base, cur, threshold=limits[0], alpha=limits[1])
    lines = [f"machine differs: {d}" for d in fingerprint.differences(
        fingerprint.fingerprint(base.machine_info), fingerprint.fingerprint(cur.machine_info))]
    lines += (regression.table(found.rows) if found.rows else []) + regression.details(found)
    lines.append(regression.summary(found))
    if plots is not None:
        named = [("baseline", base), ("current", cur)]
        for workload in compare.workloads(named):
            fig = plots.machine_chart(named, workload)
            lines += map(str, plots.save(fig, args.plots, f"compare-{workload}"))
    return lines, 1 if regression.fails(found) else 0


def _named(flag: str, parse: Callable[[str], float], value: str) -> float:
    try:
        return parse(value)
    except OptionError as exc:
        raise OptionError(f"{flag}: {exc}") from None


def check_plots_folder(folder: Path) -> None:
    """``--plots DIR`` must be a folder this process can write (made when missing), checked
    before any run is read: a device, a file, a read-only or missing parent is one line."""
    if folder.exists() and not folder.is_dir():
        raise OptionError(f"--plots {folder}: not a folder; give a folder for the charts "
                          "(made when missing)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OptionError(f"--plots {folder}: cannot make the folder ({exc.strerror}); give "
                          "a folder you can write") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OptionError(f"--plots {folder}: the folder is not writable; give a folder you "
                          "can write")


def refuse_repeats(refs: Sequence[str], loaded: Sequence[Run]) -> None:
    """The same run named twice (as two paths, or a name and its path) would be a machine
    compared with itself, its columns colliding: refused, naming it."""
    seen: dict[str, str] = {}
    for ref, r in zip(refs, loaded, strict=True):
        where = os.path.realpath(r.where) if os.path.exists(r.where) else r.where
        if where in seen:
            raise OptionError(f"{ref!r} and {seen[where]!r} are the same run ({r.where}); "
                              "give each run once")
        seen[where] = ref


def history_report(args: argparse.Namespace) -> tuple[Lines, int]:
    """--html and --steps: the runs' history (reporting/history.py), its steps
    (reporting/steps.py), the page (reporting/page.py)."""
    from pytest_mlbench.reporting import history_cache, page, steps

    for flag in ("machines", "compare", "processes", "time", "plots"):
        if getattr(args, flag):
            raise OptionError(f"--{flag} does not go with --html or --steps (the page draws "
                              "its own charts; --steps reads a history of runs)")
    threshold = _named("--threshold", parse_percent, args.threshold)
    alpha = _named("--alpha", parse_alpha, args.alpha)
    if args.html is not None:
        page.check_folder(args.html)
    store = sessions.storage(build_gate_settings({"baselines": args.baselines}), Path.cwd())
    found = history_cache.read(args.runs, partial(resolve_anywhere, store), args.reference,
                               args.html)
    impls = sorted({s.ident.impl for s in found.series})
    if args.reference and args.reference not in impls:
        raise OptionError(f"--reference {args.reference!r}: no such implementation in the "
                          f"runs; available: {', '.join(impls) or 'none'}")
    result = steps.find(found, alpha, threshold)
    lines = steps.lines(found, result) if args.steps else []
    if args.html is not None:
        lines.append(f"page: {page.write(args.html, found, result, args.reference)}")
    return lines, 1 if args.steps and result.steps else 0


def run(args: argparse.Namespace, plots: ModuleType | None) -> tuple[Lines, int]:
    if args.html is not None or args.steps:
        return history_report(args)
    if args.plots is not None and plots is not None:
        check_plots_folder(args.plots)
    for flag in ("processes", "time"):
        if getattr(args, flag) and (args.compare or args.machines):
            raise OptionError(f"--{flag} is for one run's report; it does not go with "
                              f"--{'compare' if args.compare else 'machines'}")
    if args.compare and len(args.runs) != 2:
        raise OptionError(f"--compare takes two runs, BASELINE and RUN; got {len(args.runs)}")
    limits = _named("--threshold", parse_percent, args.threshold), _named(
        "--alpha", parse_alpha, args.alpha)  # bad values fail before any file is read
    loaded = [load(ref, args.baselines) for ref in args.runs]
    if not args.compare:
        refuse_repeats(args.runs, loaded)
    if args.compare:
        return two_runs(limits, args, loaded[0], loaded[1], plots)
    for r in loaded:
        if not r.cases:
            raise BaselineError(f"{r.where}: no pytest-mlbench case in this run ({len(r.entries)} "
                                "pytest-benchmark entries, none with extra_info['mlbench']): "
                                "nothing to report; give a run saved from a session of "
                                "pytest-mlbench cases")
    if args.machines:
        return machines(args, [(_label(r, loaded), r) for r in loaded], plots), 0
    return [line for r in loaded for line in one_run(args, r, plots)], 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "cache":
        return compile_cache.command(args)
    if args.command == "init":
        return init(args)
    plots = plots_module() if args.plots else None
    if args.plots and plots is None:
        print(f"{PROG}: charts skipped: matplotlib is not installed ({EXTRA})", file=sys.stderr)
    try:
        lines, status = run(args, plots)
    except (BaselineError, OptionError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a chart that cannot be written (a full disk, a folder removed)
        what = f" {exc.filename}" if exc.filename else ""
        why = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        print(f"{PROG}: error: cannot write{what}: {why}; free space or give another "
              f"{'--html' if args.html is not None else '--plots'} folder", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return status


def _label(run: Run, loaded: Sequence[Run]) -> str:
    """The machine id; with the file name when two runs share a machine id, and with the
    whole path when they share that too (copies of one file): every column its own name."""
    ids = [compare.label(r) for r in loaded]
    name = compare.label(run)
    if ids.count(name) == 1:
        return name
    stems = [f"{compare.label(r)}:{Path(r.where).stem}" for r in loaded]
    stem = f"{name}:{Path(run.where).stem}"
    return stem if stems.count(stem) == 1 else f"{name}:{run.where}"
