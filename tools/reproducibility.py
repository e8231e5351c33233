"""Run the same benchmark session several times and show whether its numbers hold (issue 10):

    python tools/reproducibility.py --runs 3 -- --mlbench-size=default -k "mlp- or linreg-d100 or vit-"

Each run is a separate pytest session (``pytest suites <args> --benchmark-json=...``). For every
comparison group, each implementation's step time normalised to one reference implementation
(the fastest of the first run, fixed for all runs) is shown per run with the interval the
run predicts for a repeat run (99%, stats.PREDICTION), then the spread across runs (largest /
smallest - 1) and whether every run's interval contains every other run's median. A figure
holds when the spread is at most ``--limit`` and the intervals contain the other runs'
medians.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_mlbench import tables  # noqa: E402
from pytest_mlbench.measuring import hostspeed  # noqa: E402
from pytest_mlbench.reporting import normalised as report  # noqa: E402
from pytest_mlbench.stats import Ratio  # noqa: E402
from pytest_mlbench.storing.record import Record  # noqa: E402
from pytest_mlbench.storing.runs import Run, load_run  # noqa: E402


def session(args: list[str], out: Path) -> float:
    start = time.monotonic()
    cmd = [sys.executable, "-m", "pytest", "suites", "-q", "-p", "no:cacheprovider",
           f"--benchmark-json={out}", *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if not out.is_file():
        print("\n".join((done.stdout + done.stderr).splitlines()[-20:]), file=sys.stderr)
        raise SystemExit(f"the session wrote no results (exit {done.returncode})")
    return time.monotonic() - start


def records(run: Run) -> dict[str, dict[str, Record]]:
    """``{group: {impl: record}}`` of one run's timed cases."""
    out: dict[str, dict[str, Record]] = {}
    for _, record in run.cases:
        if record.measure is not None:
            out.setdefault(record.identity.group, {})[record.identity.impl] = record
    return out


def reference(first: dict[str, Record]) -> str:
    """A group's reference in every run: its fastest implementation in the first."""
    return min(first, key=lambda impl: first[impl].measure.step_s)  # type: ignore[union-attr]


def ratios(run: dict[str, dict[str, Record]],
           refs: dict[str, str]) -> dict[tuple[str, str], Ratio]:
    """``{(group, impl): ratio to the group's reference}`` of one run, every ratio of the
    run judged together as the normalised table judges them (report.relatives)."""
    keys = [(g, impl) for g, found in run.items() if refs.get(g) in found
            for impl in found if impl != refs[g]]
    pairs = [(run[g][impl].measure, run[g][refs[g]].measure) for g, impl in keys]
    return dict(zip(keys, report.relatives(pairs), strict=True))  # type: ignore[arg-type]


def group_rows(group: str, ref: str, runs: list[dict[str, Record]],
               found_ratios: list[dict[tuple[str, str], Ratio]],
               limit: float) -> tuple[list[list[str]], int]:
    first = runs[0]
    rows, failing = [], 0
    for impl in sorted(first, key=lambda i: first[i].measure.step_s):  # type: ignore[union-attr]
        found = [run.get(impl) for run in runs]
        if any(r is None or ref not in run for r, run in zip(found, runs, strict=True)):
            rows.append([impl] + ["-"] * (len(runs) + 2))
            continue
        if impl == ref:
            rows.append([impl, *["1.00 [1.00, 1.00]"] * len(runs), "0.0%", "holds"])
            continue
        ratios = [each[(group, impl)] for each in found_ratios]
        values = [q.value for q in ratios]
        spread = max(values) / min(values) - 1
        contained = all(q.next_low <= v <= q.next_high for q in ratios for v in values)
        ok = spread <= limit and contained
        failing += not ok
        cells = [f"{q.value:.2f} {tables.interval(q.next_low, q.next_high, '.2f')}" for q in ratios]
        rows.append([impl, *cells, f"{spread:.1%}",
                     ("holds" if ok else "DOES NOT HOLD") + ("" if contained else
                                                            " (interval misses a median)")])
    return rows, failing


def host_rows(runs: list[Run]) -> list[list[str]]:
    """Each host probe's median per run (and its change from run 1): whether the host itself
    ran slower or faster between the runs (pytest_mlbench/measuring/hostspeed.py)."""
    found = [hostspeed.summary(hostspeed.of_run(run.machine_info)) for run in runs]
    rows = []
    for name, label in hostspeed.LABELS.items():
        if all(name in f for f in found):
            first = found[0][name][0]
            rows.append([label] + [f"{f[name][0]:.2f} ms ({f[name][0] / first - 1:+.1%})"
                                   for f in found])
    return rows


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--runs", type=int, default=3)
    cli.add_argument("--limit", type=float, default=0.10)
    cli.add_argument("--keep", type=Path, default=None,
                     help="write the runs' JSON here (run1.json, ...) instead of a temporary folder")
    cli.add_argument("--read", type=Path, default=None,
                     help="run nothing: judge the runs kept earlier in this folder (run1.json, "
                          "run2.json, ...)")
    cli.add_argument("pytest_args", nargs="*")
    args = cli.parse_args()
    if not args.read and args.runs < 2:
        cli.error(f"--runs {args.runs}: at least 2 runs are needed to compare")
    if args.read:
        paths = sorted(args.read.glob("run*.json"), key=lambda p: int(p.stem[3:] or 0))
        if len(paths) < 2:
            cli.error(f"{args.read}: fewer than two run*.json files to compare")
        args.runs = len(paths)
        loaded = [load_run(p) for p in paths]
    else:
        with tempfile.TemporaryDirectory(prefix="mlbench-repro-") as tmp:
            folder = args.keep or Path(tmp)
            folder.mkdir(parents=True, exist_ok=True)
            paths = [folder / f"run{i + 1}.json" for i in range(args.runs)]
            for i, path in enumerate(paths):
                took = session(args.pytest_args, path)
                print(f"run {i + 1}/{args.runs}: {took:.0f} s", file=sys.stderr, flush=True)
            loaded = [load_run(p) for p in paths]  # before the temporary folder goes
    runs, host = [records(r) for r in loaded], host_rows(loaded)
    refs = {group: reference(found) for group, found in runs[0].items()}
    found_ratios = [ratios(run, refs) for run in runs]
    header = ["implementation", *(f"run {i + 1}: ratio [{report.NEXT}]" for i in range(args.runs)),
              "spread", f"within {args.limit:.0%} and intervals"]
    total = 0
    for group in runs[0]:
        rows, failing = group_rows(group, refs[group], [r.get(group, {}) for r in runs],
                                   found_ratios, args.limit)
        total += failing
        print(f"\n{group}")
        print("\n".join(tables.render(header, rows, indent="  ", note=True)))
    if host:
        print("\nhost probe before each process, median per run (change from run 1)")
        print("\n".join(tables.render(["probe", *(f"run {i + 1}" for i in range(args.runs))],
                                       host, indent="  ")))
        probes = [hostspeed.of_run(run.machine_info) for run in loaded]
        for i, probe in enumerate(probes):
            for note in (hostspeed.swing(probe), hostspeed.drift(probes[0], probe) if i else ""):
                if note:
                    print(f"  run {i + 1}: {note}")
    print(f"\n{total} implementation(s) do not hold" if total else "\nevery figure holds")
    return 1 if total else 0


if __name__ == "__main__":
    raise SystemExit(main())
