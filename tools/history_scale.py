"""How long the history page takes at scale (issue 53): a baselines/ tree of many runs
written by the project's own writers, then ``pytest-mlbench report --steps --html`` timed over
it, then the page opened in headless Chromium (the network refused) and timed until it is
built with its first charts drawn.

    python tools/history_scale.py --runs 1000 --cases 300 [--out DIR] [--keep]

Each record carries the checks of the first record of the committed baseline (baselines/),
so the files are as large as real runs (--bare: none). Three cases step (10%, 15%, 30%) at
runs 300, 500 and 800. Prints the host probe (measuring/hostspeed.py) and every figure; the
tree is written once and kept with --keep (or --out), and a second build, with the runs'
files cached by the OS, is timed too."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_mlbench import cli  # noqa: E402
from pytest_mlbench.measuring import hostspeed  # noqa: E402
from tests import browser, history_runs  # noqa: E402


def cpu_s() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def real_checks(bare: bool) -> dict[str, object]:
    committed = sorted((ROOT / "baselines").glob("*/*.json"))
    if bare or not committed:
        return {}
    for entry in json.loads(committed[0].read_text())["benchmarks"]:
        record = (entry.get("extra_info") or {}).get("mlbench")
        if record:
            return dict(record["checks"])
    return {}


def build(tree: Path, site: Path) -> tuple[float, float, str]:
    """Wall and CPU seconds of ``report --steps --html``, and its first line."""
    out = io.StringIO()
    wall, cpu = time.perf_counter(), cpu_s()
    with contextlib.redirect_stdout(out):
        status = cli.main(["report", "--steps", "--html", str(site), str(tree)])
    wall, cpu = time.perf_counter() - wall, cpu_s() - cpu
    if status not in (0, 1):
        raise SystemExit(f"report exited {status}")
    return wall, cpu, out.getvalue()


def open_page(site: Path) -> float:
    """Seconds from asking for the page until it is built and a chart is drawn (and, printed,
    the page's own count: from navigation to built)."""
    found = browser.find()
    if found is None:
        print(f"page not opened: {browser.INSTALL}")
        return float("nan")
    with browser.chromium(found) as chromium:
        start = time.perf_counter()
        tab = chromium.open((site / "index.html").as_uri())
        tab.wait_for("window.mlbenchReady === true", timeout=120)
        print(f"page built {tab.evaluate('window.mlbenchBuiltMs') / 1e3:.2f} s after "
              "navigation began (the page's own clock)")
        tab.evaluate("document.querySelector('.chart').scrollIntoView()")
        tab.wait_for("Object.keys(window.mlbenchCharts).length > 0", timeout=120)
        seconds = time.perf_counter() - start
        if tab.problems or not all(u.startswith("file://") for u in tab.requests):
            raise SystemExit(f"the page complained or fetched: {tab.problems} {tab.requests}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--bare", action="store_true", help="records without checks")
    args = parser.parse_args()
    print("host probe:", hostspeed.line({k: [v] for k, v in hostspeed.measure().items()}))
    with tempfile.TemporaryDirectory(prefix="mlbench-scale-") as scratch:
        out = args.out or Path(scratch)
        tree = out / "baselines"
        if not tree.exists():
            out.mkdir(parents=True, exist_ok=True)
            start = time.perf_counter()
            history_runs.write(tree, runs=args.runs, count=args.cases,
                               steps=((7, 300, 0.10), (111, 500, 0.15), (222, 800, 0.30)),
                               checks=real_checks(args.bare))
            size = sum(f.stat().st_size for f in tree.rglob("*.json"))
            print(f"wrote {args.runs} runs x {args.cases} cases, {size / 1e6:.0f} MB, in "
                  f"{time.perf_counter() - start:.0f} s")
        for attempt in ("first", "second"):
            wall, cpu, said = build(tree, out / "site")
            data = (out / "site" / "data.js").stat().st_size
            print(f"build ({attempt}): {wall:.1f} s wall, {cpu:.1f} s CPU; data.js "
                  f"{data / 1e6:.1f} MB; {said.splitlines()[0]}")
        print(said)
        print(f"page opened and drawn in {open_page(out / 'site'):.2f} s")
        if args.keep and args.out is None:
            print("--keep without --out: the scratch folder goes; give --out DIR to keep it")


if __name__ == "__main__":
    main()
