"""The history page in a real browser (headless Chromium over the DevTools pipe, the network
refused: tests/browser.py): what it draws, that it fetches nothing and complains of nothing,
and that the watch would see a page that did. Skipped, naming how to install one, where no
browser is found."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_mlbench import cli
from tests import browser, history_runs
from tests.history_runs import Built, data_of, two_machines

# -- in a real browser, with the network refused ----------------------------------------------

REPO = Path(__file__).resolve().parents[3]

# a chart's canvas: how many pixels are drawn at all, how many in the step marks' red
# (#b00020; the figure is blue, the band pale blue, the processes grey), how many points
PIXELS = """(i => { const u = window.mlbenchCharts[i]; const c = u.ctx.canvas;
  const d = u.ctx.getImageData(0, 0, c.width, c.height).data; let drawn = 0, red = 0;
  for (let k = 0; k < d.length; k += 4) {
    if (d[k + 3]) drawn++;
    if (d[k + 3] > 200 && d[k] > 150 && d[k + 1] < 40 && d[k + 2] < 70) red++; }
  return {drawn: drawn, red: red, points: u.data[0].length}; })"""


@pytest.fixture(scope="module")
def chromium() -> Iterator[browser.Browser]:
    found = browser.find()
    if found is None:
        pytest.skip(browser.INSTALL)
    with browser.chromium(found) as opened:
        yield opened


def choose(tab: browser.Page, select: str, value: str) -> None:
    tab.evaluate(f"(() => {{ const s = document.getElementById('{select}'); s.value = "
                 f"'{value}'; s.dispatchEvent(new Event('change')); }})()")


def assert_offline_and_quiet(tab: browser.Page, site: Path) -> None:
    """Nothing asked for but the page's own files, and nothing the console calls an error."""
    assert tab.requests and all(url.startswith(site.as_uri() + "/") for url in tab.requests), \
        tab.requests
    assert tab.problems == []


def test_the_page_draws_tables_charts_and_the_step_offline(
        built: Built, stepped: history_runs.History, chromium: browser.Browser,
        tmp_path: Path) -> None:
    """The stepped history's page: the latest run's 90 rows, one step listed (the injected
    case's) and marked on its chart alone, charts drawn as they come into view, selection
    and the normalised scale; a screenshot kept (history-page.png in this test's tmp_path)."""
    tab = chromium.open((built.site / "index.html").as_uri())
    tab.wait_for("window.mlbenchReady === true")
    assert tab.evaluate("document.querySelectorAll('.group tr[data-framework]').length") == 90
    label = stepped.labels[history_runs.STEP_CASE]
    listed = tab.evaluate("[...document.querySelectorAll('#steps tr[data-series]')]"
                          ".map(r => r.textContent)")
    assert len(listed) == 1 and label in listed[0] and "0025_main-25.json" in listed[0]
    index = data_of(built.site)["steps"][0]["s"]
    assert tab.evaluate("[...document.querySelectorAll('.chart')].filter(b => b.dataset.steps"
                        " !== '0').map(b => Number(b.dataset.series))") == [index]
    tab.evaluate(f"document.querySelector('.chart[data-series=\"{index}\"]')"
                 ".scrollIntoView({block: 'center'})")
    tab.wait_for(f"!!window.mlbenchCharts[{index}] && "
                 "Object.keys(window.mlbenchCharts).length > 1")
    found = tab.evaluate(PIXELS + f"({index})")
    assert found["points"] == 40 and found["drawn"] > 5000 and found["red"] > 100, found
    other = next(int(k) for k in tab.evaluate("Object.keys(window.mlbenchCharts)")
                 if int(k) != index)
    plain = tab.evaluate(PIXELS + f"({other})")
    assert plain["drawn"] > 5000 and plain["red"] == 0, plain
    box = tab.evaluate(f"(() => {{ const r = window.mlbenchCharts[{index}].over"
                       ".getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()")
    tab.send("Input.dispatchMouseEvent", type="mouseMoved", x=box[0] + box[2] * 0.62,
             y=box[1] + box[3] / 2)
    tip = tab.wait_for("!document.getElementById('tip').hidden && "
                       "document.getElementById('tip').textContent")
    assert re.match(r"commit [0-9a-f]{12}\ndate 2026-\d\d-\d\dT.*\nrun 00\d\d_main-\d\d.json"
                    r"\nfigure [0-9.]+ ms \[", tip), tip
    shot = tab.screenshot(tmp_path / "history-page.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    choose(tab, "f-framework", "torch")
    assert tab.evaluate("document.getElementById('shown').textContent") == "30 of 90 cases shown"
    assert tab.evaluate("document.querySelectorAll('.group tr[data-framework]:not([hidden])')"
                        ".length") == 30
    choose(tab, "f-framework", "")
    choose(tab, "f-scale", "norm")
    tab.wait_for(f"!!window.mlbenchCharts[{index}]")
    assert tab.evaluate(f"window.mlbenchCharts[{index}].data[3].every(v => v >= 1)")
    assert_offline_and_quiet(tab, built.site)


def test_machines_side_by_side_and_the_committed_baseline_open_offline(
        chromium: browser.Browser, tmp_path: Path) -> None:
    site = tmp_path / "two"
    assert cli.main(["report", "--html", str(site), str(two_machines(tmp_path / "runs"))]) == 0
    tab = chromium.open((site / "index.html").as_uri())
    tab.wait_for("window.mlbenchReady === true && Object.keys(window.mlbenchCharts).length == 4")
    assert tab.evaluate("[...document.querySelectorAll('.case')].map(c => "
                        "c.querySelectorAll('.chart').length)") == [2, 2]
    assert_offline_and_quiet(tab, site)
    committed = sorted((REPO / "baselines").glob("*/*.json"))
    if not committed:
        return  # no baseline committed in this tree
    site = tmp_path / "committed"
    assert cli.main(["report", "--html", str(site), str(committed[0])]) == 0
    tab = chromium.open((site / "index.html").as_uri())
    tab.wait_for("window.mlbenchReady === true")
    assert tab.evaluate("document.querySelectorAll('.group tr[data-framework]').length") > 10
    tab.evaluate("document.querySelector('.chart').scrollIntoView()")  # drawn when in view
    first = tab.wait_for("Object.keys(window.mlbenchCharts)[0]")
    assert tab.evaluate(PIXELS + f"({first})")["points"] == 1
    assert_offline_and_quiet(tab, site)


def test_the_watch_sees_a_page_that_fetches_or_complains(chromium: browser.Browser,
                                                         tmp_path: Path) -> None:
    """The checks above can fail: a page asking the network for an image and writing an
    error to its console is caught on both counts."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!doctype html><img src="http://example.invalid/x.png">'
                   '<script>console.error("broken page")</script>')
    tab = chromium.open(bad.as_uri())
    tab.wait_for("document.readyState === 'complete'")
    assert "http://example.invalid/x.png" in tab.requests
    with pytest.raises(AssertionError):
        assert_offline_and_quiet(tab, tmp_path)
    assert any("broken page" in p for p in tab.problems), tab.problems
    assert any(p.startswith("load failed") for p in tab.problems), tab.problems
