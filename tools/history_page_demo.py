"""The history page's screenshot in docs/USAGE.md, made the way a user makes the page.

    python tools/history_page_demo.py docs/img/history-page.png

Writes the generated history the tests use (tests/history_runs.py: 40 runs x 90 cases on one
machine, one case 15% slower from run 25 on), runs

    pytest-mlbench report --html SITE --steps BASELINES

on it, opens SITE/index.html in headless Chromium with the network refused, selects the
workload and precision of the case that steps, and keeps a screenshot of the top of the page
(the step listed, the latest run's table, the case's charts with the step marked)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_mlbench import cli  # noqa: E402
from tests import browser, history_runs  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("png", type=Path)
    args = parser.parse_args()
    found = browser.find()
    if found is None:
        raise SystemExit(browser.INSTALL)
    with tempfile.TemporaryDirectory(prefix="mlbench-demo-") as scratch:
        made = history_runs.write(Path(scratch) / "baselines", seed=1)
        site = Path(scratch) / "site"
        print("status", cli.main(["report", "--html", str(site), "--steps", str(made.root)]))
        workload, _, _, precision = history_runs.cases()[history_runs.STEP_CASE]
        with browser.chromium(found, size=(1400, 1100)) as chromium:
            tab = chromium.open((site / "index.html").as_uri())
            tab.wait_for("window.mlbenchReady === true")
            for select, value in (("f-workload", workload), ("f-precision", precision)):
                tab.evaluate(f"(() => {{ const s = document.getElementById('{select}'); "
                             f"s.value = '{value}'; s.dispatchEvent(new Event('change')); }})()")
            tab.wait_for("Object.keys(window.mlbenchCharts).length >= 2")
            tab.screenshot(args.png)
            if tab.problems:
                raise SystemExit(f"the page complained: {tab.problems}")
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
