"""Calibrate the regression gate on this machine (issue 4): save a baseline, then

  (a) compare the unchanged code against it ``--runs`` times: expect no failure;
  (b) make every training step ``--slowdown`` slower (tools/mlbench_slowdown.py wraps the
      trainers; no workload is edited) and compare ``--runs`` times: expect a failure each time.

Runs a small subset (``--workloads mlp`` and ``-k``) at ``--mlbench-size=default`` so the whole
experiment takes a few minutes, in a private suites root of symlinks so half-written workloads
elsewhere in suites/ cannot break it. Prints a Markdown summary for docs/GATE.md.

    /work/venv/bin/python tools/calibrate_gate.py --runs 20 --slowdown 0.2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_mlbench import gate  # noqa: E402
from pytest_mlbench.baseline import load_run  # noqa: E402

KEYWORD = "control or (mlp and (numpy or jax-jit))"
TEST_FILES = ("suites/test_workloads.py", "suites/test_control.py")  # not other suites


@dataclass
class Trial:
    phase: str
    exit_code: int
    changes: dict[str, float]  # benchmark name -> median change
    p_values: dict[str, float]
    verdicts: dict[str, str]
    load: float


def pytest_cmd(args: argparse.Namespace, suites: Path, baselines: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", *TEST_FILES, "-q", "-p", "no:cacheprovider",
            f"--mlbench-size={args.size}", "-o", f"mlbench_suites={suites}",
            f"--mlbench-baselines={baselines}", "-k", args.keyword,
            f"--mlbench-gate-threshold={args.threshold}", *extra]


def run(cmd: list[str], slowdown: float) -> int:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tools"), MLBENCH_SLOWDOWN=str(slowdown))
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # not a verdict: show why, the caller retries
        print("\n".join((done.stdout + done.stderr).splitlines()[-5:]), file=sys.stderr)
    return done.returncode


def trial(args: argparse.Namespace, suites: Path, baselines: Path, out: Path, phase: str,
          slowdown: float) -> Trial:
    load = os.getloadavg()[0]
    for _ in range(3):  # a crashed run (not a gate verdict) is retried, not counted
        code = run(pytest_cmd(args, suites, baselines, "--mlbench-gate=calib",
                              f"--benchmark-json={out}", "-p", "mlbench_slowdown"), slowdown)
        if code in (0, 1) and out.is_file():
            break
    else:
        raise SystemExit(f"{phase}: three runs in a row crashed; see the output above")
    base = load_run(next(baselines.glob("*/0001_calib.json")))
    found = gate.compare_runs(base, load_run(out), threshold=float(args.threshold.strip("%")) / 100,
                              alpha=0.01)
    return Trial(phase, code, {c.name: c.change for c in found},
                 {c.name: c.p_value for c in found}, {c.name: c.verdict for c in found}, load)


def summarise(trials: list[Trial], phase: str) -> list[str]:
    mine = [t for t in trials if t.phase == phase]
    failed = sum(t.exit_code == 1 for t in mine)
    lines = [f"**{phase}**: {failed} of {len(mine)} gate runs failed "
             f"(exit codes {sorted({t.exit_code for t in mine})}; 1-min load "
             f"{min(t.load for t in mine):.2f}-{max(t.load for t in mine):.2f})", "",
             "| benchmark | median change (min / median / max) | largest p | SLOWER verdicts |",
             "|---|---|---|---|"]
    for name in sorted(mine[0].changes):
        ch = [t.changes[name] for t in mine if name in t.changes]
        ps = [t.p_values[name] for t in mine if name in t.p_values]
        slow = sum(t.verdicts.get(name) == gate.FAILED for t in mine)
        lines.append(f"| {name} | {min(ch):+.1%} / {statistics.median(ch):+.1%} / "
                     f"{max(ch):+.1%} | {max(ps):.2g} | {slow}/{len(mine)} |")
    return lines + [""]


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--runs", type=int, default=20)
    cli.add_argument("--slowdown", type=float, default=0.2)
    cli.add_argument("--threshold", default="10%")
    cli.add_argument("--size", default="default")
    cli.add_argument("--keyword", default=KEYWORD)
    cli.add_argument("--workloads", default="mlp")
    cli.add_argument("--json", type=Path, default=None, help="also write every trial here")
    args = cli.parse_args()
    with tempfile.TemporaryDirectory(prefix="mlbench-calib-") as tmp:
        suites, baselines = Path(tmp, "suites"), Path(tmp, "baselines")
        suites.mkdir()
        for name in args.workloads.split(","):
            (suites / name).symlink_to(ROOT / "suites" / name)
        if run(pytest_cmd(args, suites, baselines, "--mlbench-save=calib"), 0) != 0:
            print("saving the calibration baseline failed", file=sys.stderr)
            return 2
        trials = []
        for phase, slowdown in (("unchanged", 0.0), (f"{args.slowdown:.0%} slower", args.slowdown)):
            for i in range(args.runs):
                trials.append(trial(args, suites, baselines, Path(tmp, f"{phase}-{i}.json"),
                                    phase, slowdown))
                print(f"{phase} {i + 1}/{args.runs}: exit {trials[-1].exit_code}",
                      file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps([t.__dict__ for t in trials], indent=1))
    cores = len(os.sched_getaffinity(0))
    if max(t.load for t in trials) > cores / 2:
        print(f"WARNING: 1-min load reached {max(t.load for t in trials):.1f} on {cores} cores: "
              "other processes shaped these figures; rerun on a quiet machine.\n")
    for phase in dict.fromkeys(t.phase for t in trials):
        print("\n".join(summarise(trials, phase)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
