"""Calibrate the same-machine A/B gate on this machine (issue 10), in one command:

    python tools/calibrate_gate.py --runs 20 --slowdown 0.2 --busy

Each trial is a real pytest session of the whole default mlp group (every implementation,
single device) under ``--mlbench-ab=python:<this interpreter>``: the base and head sides run
the same code, interleaved, so every verdict other than "no significant change" on an
unchanged tree is a false alarm. Three phases, ``--runs`` sessions each:

  unchanged   A/A: expect 0 failing sessions;
  slower      the head's timed rounds made ``--slowdown`` slower (tools/slowdown): expect every
              session to fail, every implementation SLOWER;
  busy        A/A while a busy loop occupies one core for the whole session: expect 0.

The phases take turns, session by session. ``--json FILE`` keeps every trial as it ends (with
the revision it ran); ``--resume`` adds to the trials FILE already holds, up to ``--runs`` a
phase, so a calibration can run in several sittings; ``--read FILE`` summarises kept trials.

Prints a Markdown summary for docs/GATE.md (and writes every trial with --json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_mlbench.options import GATE_PROCESSES  # noqa: E402

KEYWORD = "test_case and mlp- and not mlp_"  # the mlp group, not the layer-API mlp_layers


@dataclass
class Trial:
    phase: str
    exit_code: int
    seconds: float
    load: float
    changes: dict[str, float]  # case -> change of the paired median ratio
    verdicts: dict[str, str]
    revision: str = ""  # the commit the session ran (empty in trials kept before it was)


def revision() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return (done.stdout.strip() or "unknown") + ("+changes" if dirty else "")


def command(args: argparse.Namespace, out: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", "suites/test_workloads.py", "-q",
            "-p", "no:cacheprovider", "-k", args.keyword, f"--mlbench-size={args.size}",
            "--mlbench-workers=1", f"--mlbench-processes={args.processes}",
            f"--mlbench-threads={args.threads}", f"--benchmark-max-time={args.max_time}",
            f"--mlbench-ab=python:{sys.executable}", f"--benchmark-json={out}",
            f"--mlbench-gate-threshold={args.threshold}"]


def trial(args: argparse.Namespace, phase: str, out: Path) -> Trial:
    env = dict(os.environ, MLBENCH_SLOWDOWN="0")
    if phase == "slower":
        env.update(MLBENCH_SLOWDOWN=str(args.slowdown),
                   PYTHONPATH=os.pathsep.join([str(ROOT / "tools" / "slowdown"),
                                               env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    busy = None
    if phase == "busy":
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    load, start = os.getloadavg()[0], time.monotonic()
    try:
        done = subprocess.run(command(args, out), cwd=ROOT, env=env, capture_output=True,
                              text=True)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    if done.returncode not in (0, 1) or not out.is_file():
        print("\n".join((done.stdout + done.stderr).splitlines()[-15:]), file=sys.stderr)
        raise SystemExit(f"{phase}: the session did not reach a verdict (exit "
                         f"{done.returncode})")
    rows = json.loads(out.read_text()).get("mlbench_ab", [])
    return Trial(phase, done.returncode, time.monotonic() - start, load,
                 {r["name"]: r["change"] for r in rows if r["change"] is not None},
                 {r["name"]: r["verdict"] for r in rows}, args.revision)


def summarise(trials: list[Trial], phase: str) -> list[str]:
    mine = [t for t in trials if t.phase == phase]
    failed = sum(t.exit_code == 1 for t in mine)
    revisions = ", ".join(f"{r or 'unrecorded'} x{n}" for r, n in
                          sorted(Counter(t.revision for t in mine).items()))
    lines = [f"**{phase}**: {failed} of {len(mine)} sessions failed (1-min load at start "
             f"{min(t.load for t in mine):.2f}-{max(t.load for t in mine):.2f}; "
             f"{statistics.median(t.seconds for t in mine):.0f} s per session; revisions "
             f"{revisions})", "",
             "| case | change (min / median / max) | SLOWER verdicts |", "|---|---|---|"]
    for name in sorted({n for t in mine for n in t.verdicts}):
        ch = [t.changes[name] for t in mine if name in t.changes]
        slow = sum(t.verdicts.get(name) == "SLOWER" for t in mine)
        cells = (f"{min(ch):+.1%} / {statistics.median(ch):+.1%} / {max(ch):+.1%}" if ch
                 else "-")
        lines.append(f"| {name} | {cells} | {slow}/{len(mine)} |")
    return lines + [""]


def read(cli: argparse.ArgumentParser, path: Path) -> list[Trial]:
    try:
        return [Trial(**t) for t in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError) as exc:
        cli.error(f"{path}: not a file of calibration trials ({exc})")


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--runs", type=int, default=20)
    cli.add_argument("--slowdown", type=float, default=0.2)
    cli.add_argument("--busy", action="store_true", help="also the A/A phase with a busy core")
    cli.add_argument("--phases", default="",
                     help="comma list of phases to run instead (unchanged, slower, busy)")
    cli.add_argument("--threshold", default="10%")
    cli.add_argument("--processes", type=int, default=GATE_PROCESSES)
    cli.add_argument("--max-time", type=float, default=0.5,
                     help="--benchmark-max-time a side (the example workflow's)")
    cli.add_argument("--threads", default="1", help="compute threads (the main job's: 1)")
    cli.add_argument("--size", default="default")
    cli.add_argument("--keyword", default=KEYWORD)
    cli.add_argument("--json", type=Path, default=None, help="also write every trial here")
    cli.add_argument("--resume", action="store_true",
                     help="keep the trials the --json file holds and run only the sessions "
                          "each phase still lacks")
    cli.add_argument("--read", type=Path, default=None,
                     help="summarise the trials a --json file holds instead of running any")
    args = cli.parse_args()
    if args.resume and args.json is None:
        cli.error("--resume adds to the trials of a --json file: name one")
    phases = ["unchanged", "slower"] + (["busy"] if args.busy else [])
    if args.phases:
        phases = [p.strip() for p in args.phases.split(",") if p.strip()]
        unknown = set(phases) - {"unchanged", "slower", "busy"}
        if unknown:
            cli.error(f"unknown phase(s) {', '.join(sorted(unknown))}; choose from unchanged, "
                      "slower, busy")
    trials: list[Trial] = []
    if args.read:
        trials = read(cli, args.read)
        phases = [p for p in ("unchanged", "slower", "busy") if any(t.phase == p for t in trials)]
        print(f"{len(trials)} trials read from {args.read}\n")
    else:
        if args.resume and args.json.is_file():
            trials = read(cli, args.json)
        args.revision = revision()
        # the phases take turns (unchanged, slower, busy, unchanged, ...): a slow hour of the
        # host falls on every phase alike, and a stopped calibration has every phase in it
        with tempfile.TemporaryDirectory(prefix="mlbench-calib-") as tmp:
            for i in range(args.runs):
                for phase in phases:
                    if sum(t.phase == phase for t in trials) > i:
                        continue  # kept from an earlier sitting
                    trials.append(trial(args, phase, Path(tmp, f"{phase}-{i}.json")))
                    t = trials[-1]
                    print(f"{phase} {i + 1}/{args.runs}: exit {t.exit_code} in {t.seconds:.0f} s",
                          file=sys.stderr, flush=True)
                    if args.json:  # after every trial: an interrupted calibration keeps them
                        args.json.write_text(json.dumps([asdict(t) for t in trials], indent=1))
        print(f"`python tools/calibrate_gate.py --runs {args.runs} --slowdown {args.slowdown}"
              f"{' --busy' if args.busy else ''}"
              f"{f' --phases {args.phases}' if args.phases else ''}`, {args.processes} "
              f"processes a side, {args.threads} thread(s), threshold {args.threshold}\n")
    for phase in phases:
        print("\n".join(summarise(trials, phase)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
