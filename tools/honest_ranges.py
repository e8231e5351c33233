"""The largest margin of every thresholded check over saved runs of honest code:

    python tools/honest_ranges.py baselines/amd-epyc-2c/0001_main.json [more runs ...]

A margin is a check's statistic over what it allows (checking/margins.py): a check fails
above 1.0. For each check it prints how many judgements the runs hold, the largest margin and
where, and the median: the honest range docs/MEASURING.md states ("Thresholds, calibrated on
honest code"). Exit status 1 when any margin is over 1.0 (an honest run the checks would fail).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_mlbench.checking import margins  # noqa: E402
from pytest_mlbench.measuring.outcome import PLAUSIBLE_MARGIN  # noqa: E402


def main(paths: list[str]) -> int:
    found: dict[str, list[tuple[float, str]]] = {}
    for path in paths:
        for bench in json.loads(Path(path).read_text())["benchmarks"]:
            record = bench.get("extra_info", {}).get("mlbench")
            if not record:
                continue
            for check, value in margins.of_record(record, PLAUSIBLE_MARGIN):
                found.setdefault(check, []).append((value, record["name"]))
    print(f"{'check':<24} {'judged':>6} {'median':>7} {'largest':>7}  where")
    for check, values in sorted(found.items()):
        worst = max(values)
        print(f"{check:<24} {len(values):>6} {statistics.median(v for v, _ in values):>7.3f} "
              f"{worst[0]:>7.3f}  {worst[1]}")
    return 1 if any(v > 1 for values in found.values() for v, _ in values) else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1:]))
