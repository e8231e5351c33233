"""What auditing costs the timed figure, from saved runs (issue 9):

    python tools/audit_cost.py RUN.json [RUN.json ...]

An audited round r reads the parameters (or an output) after round r-1 and after round r,
outside the clock. If those reads disturbed the timing (cold caches, a copy in flight), the
rounds right after a read (r and r+1) would be slower than the other rounds of the same
process. For each case this compares, process by process, the median of those rounds with the
median of the rest, and prints the ratio; across cases, the median and the spread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_mlbench.storing.runs import load_run  # noqa: E402


def ratios(path: Path) -> dict[str, float]:
    out = {}
    for _, record in load_run(path).cases:
        m = record.measure
        audited = record.checks.get("audited_rounds") or []
        if m is None or len(audited) != len(m.passes):
            continue
        per_process = []
        for rounds, chosen in zip(m.passes, audited, strict=True):
            near = {r for a in chosen for r in (a, a + 1)}  # 1-based round numbers
            after = [t for i, t in enumerate(rounds, start=1) if i in near]
            rest = [t for i, t in enumerate(rounds, start=1) if i not in near]
            if after and len(rest) >= 3:
                per_process.append(statistics.median(after) / statistics.median(rest))
        if per_process:
            out[record.name] = statistics.median(per_process)
    return out


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("runs", nargs="+", type=Path)
    args = cli.parse_args()
    found: dict[str, list[float]] = {}
    for path in args.runs:
        for name, value in ratios(path).items():
            found.setdefault(name, []).append(value)
    if not found:
        print("no timed case with audits in these runs")
        return 1
    width = max(len(n) for n in found)
    print(f"{'case':<{width}}  rounds next to an audit / other rounds (per run)")
    for name in sorted(found):
        print(f"{name:<{width}}  " + "  ".join(f"{v:.3f}" for v in found[name]))
    every = [v for vs in found.values() for v in vs]
    q = statistics.quantiles(every, n=10) if len(every) > 1 else [every[0]] * 9
    print(f"\n{len(every)} case-runs: median {statistics.median(every):.3f}, "
          f"10%-90% {q[0]:.3f}-{q[-1]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
