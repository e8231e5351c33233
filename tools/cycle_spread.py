"""What a saved run's rounds say about pairing by cycle (issue 52), in seconds:

    python tools/cycle_spread.py                 # the committed baseline
    python tools/cycle_spread.py RUN.json

1. **Two cases of one comparison group** (the normalised table's pairs): a group's cases take
   their turns in every cycle of a pass, so each pair of cases is a pair of processes per
   pass. For every such pair, the sd over the passes of its log ratio, as the ratio of the
   process medians and matched by cycle with each estimator over the cycles
   (stats.cycle_log is Hodges-Lehmann's); the median and root mean square over the pairs.
2. **Does a process add an offset of its own?** Within each group, each case's log median
   round per (pass, cycle), less the case's mean and the group's (pass, cycle) mean: the
   variance of a case's pass means about it beyond what its cycles' spread gives (the
   within-pass variance over the cycles). Near zero: a process adds nothing the cycles do
   not show, and a pair's spread is its cycles'. Only cases whose processes all ran every
   cycle, in groups whose cases have as many processes.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_mlbench import stats  # noqa: E402
from pytest_mlbench.storing import runs  # noqa: E402
from pytest_mlbench.storing.record import Measure  # noqa: E402

BASELINE = ROOT / "baselines" / "amd-epyc-2c" / "0001_main.json"
ESTIMATORS = {"process medians": None, "cycles' median": np.median,
              "cycles' Hodges-Lehmann": stats.cycle_log, "cycles' mean": np.mean}


def by_cycle(m: Measure) -> np.ndarray | None:
    """(processes, cycles): the log median round of each process in each cycle; None when a
    process lacks a cycle or its cycles were not recorded."""
    if len(m.cycles) != len(m.passes):
        return None
    cycles = sorted({c for labels in m.cycles for c in labels})
    out = np.full((len(m.passes), len(cycles)), np.nan)
    for i, (rounds, labels) in enumerate(zip(m.per_step(), m.cycles, strict=True)):
        for j, c in enumerate(cycles):
            picked = [t for t, k in zip(rounds, labels, strict=True) if k == c]
            if picked:
                out[i, j] = np.log(np.median(picked))
    return None if np.isnan(out).any() else out


def pair_spreads(groups: dict[str, list[Measure]]) -> None:
    found: dict[str, list[float]] = defaultdict(list)
    for members in groups.values():
        for a, b in itertools.combinations(members, 2):
            ca, cb = by_cycle(a), by_cycle(b)
            if ca is None or cb is None or ca.shape != cb.shape:
                continue
            for name, f in ESTIMATORS.items():
                logs = (np.log(stats.process_medians(b.per_step()))
                        - np.log(stats.process_medians(a.per_step())) if f is None
                        else np.array([f(x) for x in cb - ca]))
                found[name].append(float(np.var(logs, ddof=1)))
    print(f"two cases of one group: {len(found['process medians'])} pairs; sd of a pair's log "
          "ratio over the passes, median (root mean square) over the pairs")
    for name, v in found.items():
        print(f"  {name:24s} {np.sqrt(np.median(v)):.2%} ({np.sqrt(np.mean(v)):.2%})")


def process_offsets(groups: dict[str, list[Measure]]) -> None:
    print("a process's own offset beyond its cycles' spread, by group: within-pass sd of a "
          "cycle, case's pass sd, excess variance (signed sd)")
    weights, excesses = [], []
    for group, members in groups.items():
        ys = [y for y in map(by_cycle, members) if y is not None]
        if len(ys) < 2 or len({y.shape for y in ys}) > 1:
            continue
        y = np.array(ys)  # (cases, passes, cycles)
        k, n, m = y.shape
        y = y - y.mean(axis=(1, 2), keepdims=True)
        rest = (y - y.mean(axis=0, keepdims=True)) * np.sqrt(k / (k - 1))  # unbiased
        means = rest.mean(axis=2)
        within = float(((rest - means[..., None]) ** 2).sum() / (k * n * (m - 1)))
        between = float((means**2).sum() / (k * (n - 1)))
        excess = between - within / m
        weights.append(k)
        excesses.append(excess)
        print(f"  {group:32s} {np.sqrt(within):6.1%} {np.sqrt(between):6.1%} "
              f"{np.sign(excess) * np.sqrt(abs(excess)):+6.1%}")
    pooled = float(np.average(excesses, weights=weights))
    print(f"  pooled over the groups (by cases): {pooled:+.5f} "
          f"({np.sign(pooled) * np.sqrt(abs(pooled)):+.1%})")


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("run", nargs="?", type=Path, default=BASELINE)
    args = cli.parse_args()
    groups: dict[str, list[Measure]] = defaultdict(list)
    for _, record in runs.load_run(args.run).cases:
        if record.measure is not None and len(record.measure.passes) >= 2:
            groups[record.identity.group].append(record.measure)
    pair_spreads(groups)
    process_offsets(groups)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
