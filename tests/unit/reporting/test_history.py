"""``pytest-mlbench report --steps`` and ``--html`` on generated histories of saved runs
(tests/history_runs.py: 40 runs x 90 cases written by the project's own writers); the page
is opened in a real browser by the tests at the end (tests/browser.py)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pytest_mlbench import cli
from pytest_mlbench.reporting import history, history_cache, page, steps
from pytest_mlbench.storing.runs import load_run
from tests import browser, history_runs
from tests.synthetic import MACHINE, bench, record, run_json, write


@pytest.fixture(scope="module")
def stepped(tmp_path_factory: pytest.TempPathFactory) -> history_runs.History:
    """40 runs x 90 cases, case STEP_CASE 15% slower from run 25 on, nothing else."""
    return history_runs.write(tmp_path_factory.mktemp("stepped") / "baselines", seed=1)


@dataclass(frozen=True)
class Built:
    status: int
    out: str
    site: Path


@pytest.fixture(scope="module")
def built(stepped: history_runs.History, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """``report --steps --html SITE`` of the stepped history, run once for the tests below."""
    site = tmp_path_factory.mktemp("built") / "site"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli.main(["report", "--steps", "--html", str(site), str(stepped.root)])
    return Built(status, out.getvalue(), site)


def step_rows(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("  ") and line.endswith("%")]


def test_steps_names_the_injected_case_and_run_alone(stepped: history_runs.History,
                                                     built: Built) -> None:
    assert built.status == 1
    out = built.out
    assert out.startswith("steps: 1 in 90 case(s)")
    assert out.splitlines()[-1] == f"page: {built.site / 'index.html'}"
    [row] = step_rows(out)
    label = stepped.labels[history_runs.STEP_CASE]
    assert f"  {label}  " in row
    assert "run 24/40 0024_main-24" in row and "run 25/40 0025_main-25" in row
    size = float(re.search(r"([+-]\d+\.\d)%$", row)[1])  # type: ignore[index]
    assert 10 < size < 20


def test_a_step_under_the_threshold_is_not_listed(
        stepped: history_runs.History, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", "--steps", "--threshold", "25%", str(stepped.root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("steps: 0 in 90 case(s)") and "under 25%" in out


def test_ten_stepless_histories_list_no_step_in_nine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each history (40 runs x 45 cases: a history's false-alarm bound is --alpha whatever
    its number of cases) is read by ``report --steps``, every step listed however small (the
    default 10% threshold would hide a false alarm); the same histories judged with each case
    at 5% (no Bonferroni over the cases: a broken calibration) show steps in every one, so
    the check can fail."""
    read: list[history.History] = []
    real = history_cache.read

    def keep(*args: object, **kwargs: object) -> history.History:
        read.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return read[-1]

    monkeypatch.setattr(history_cache, "read", keep)
    shared = history_runs.pools(seed=50)
    clean = 0
    for k in range(10):
        root = history_runs.write(tmp_path / f"h{k}", seed=200 + k, step=False, count=45,
                                  drawn_from=shared).root
        clean += cli.main(["report", "--steps", "--threshold", "0.1%", str(root)]) == 0
        assert capsys.readouterr().out.startswith("steps: ")
    assert clean >= 9, f"{10 - clean} of 10 stepless histories listed a step"
    honest_test = steps.test
    monkeypatch.setattr(steps, "test", lambda y, w, alpha, rng, min_runs=steps.MIN_RUNS:
                        honest_test(y, w, 0.2, rng, min_runs))
    broken = sum(not steps.find(found, 0.01, 0.001).steps for found in read)
    assert broken < 9, f"a broken calibration left {broken} of 10 histories clean"


def test_history_is_in_commit_order_whatever_the_files_order(tmp_path: Path) -> None:
    """Runs sort by their commit's time, then by when they were saved: a file numbered
    later whose commit is older comes first."""
    times = ["2026-01-03T00:00:00+00:00", "2026-01-01T00:00:00+00:00",
             "2026-01-02T00:00:00+00:00"]
    paths = []
    for i, when in enumerate(times):
        run = run_json(bench(record("jax-jit", 1e-3 * (i + 1), measure_kw={"seed": i})))
        run["commit_info"] = {"id": f"{i}" * 40, "time": when}
        paths.append(write(tmp_path / f"{i}.json", run))
    found = history.history(history.digests(paths))
    assert [r.commit[0] for r in found.runs] == ["1", "2", "0"]
    [series] = found.series
    assert [p.figure for p in series.points] == pytest.approx([2e-3, 3e-3, 1e-3], rel=0.05)


def test_the_records_interval_is_used_only_when_it_belongs_to_its_rounds(tmp_path: Path) -> None:
    """A record keeps its interval (``interval_s``): read as it is when its ``step_s`` is the
    figure the rounds give, recomputed from the rounds when not (an edited file)."""
    rec = record("jax-jit", 1e-3)
    entry = bench(rec)
    entry["extra_info"]["mlbench"]["measure"]["interval_s"] = [0.5e-3, 2e-3]
    kept = history.digest_file(write(tmp_path / "kept.json", run_json(entry)))
    assert (kept.points[0].low, kept.points[0].high) == (0.5e-3, 2e-3)
    entry["extra_info"]["mlbench"]["measure"]["step_s"] = 5e-3  # no longer its rounds'
    redone = history.digest_file(write(tmp_path / "redone.json", run_json(entry)))
    assert rec.measure is not None
    est = rec.measure.estimate()
    assert (redone.points[0].low, redone.points[0].high) == pytest.approx((est.low, est.high))


def test_a_folder_gives_its_runs_without_partial_ones(stepped: history_runs.History,
                                                      tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    files = sorted((stepped.root / stepped.machine).iterdir())[:3]
    for f in files:
        shutil.copy(f, folder / f.name)
    shutil.copy(files[0], folder / "0004_main.partial.json")
    found = history.expand([str(tmp_path), str(folder / files[0].name)], Path)
    assert sorted(p.name for p in found) == [f.name for f in files]


@pytest.mark.parametrize("case, message", [
    ("empty", "no saved run (*.json) in this folder"),
    ("not json", "not a complete pytest-benchmark JSON file"),
    ("no cases", "no pytest-mlbench case in this run"),
])
def test_bad_runs_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          case: str, message: str) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    if case == "not json":
        (runs / "0001_a.json").write_text("{")
    elif case == "no cases":
        write(runs / "0001_a.json", run_json(bench(None)))
    assert cli.main(["report", "--steps", str(runs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_an_unknown_reference_and_a_mode_that_does_not_go_are_refused(
        stepped: history_runs.History, capsys: pytest.CaptureFixture[str]) -> None:
    first = str(stepped.root / stepped.machine / "0001_main-01.json")
    assert cli.main(["report", "--steps", "--reference", "jax-nope", first]) == 2
    assert "--reference 'jax-nope': no such implementation" in capsys.readouterr().err
    assert cli.main(["report", "--steps", "--machines", str(stepped.root)]) == 2
    assert "--machines does not go with --html or --steps" in capsys.readouterr().err


# -- the page's folder ------------------------------------------------------------------------

def data_of(folder: Path) -> dict:
    text = (folder / page.DATA).read_text()
    assert text.startswith("window.MLBENCH = ") and text.endswith(";\n")
    return json.loads(text[len("window.MLBENCH = "):-2])


def test_the_page_holds_the_history_the_step_and_the_latest_tables(
        stepped: history_runs.History, built: Built) -> None:
    site = built.site
    assert sorted(p.name for p in site.iterdir()) == sorted(
        (*page.ASSETS, page.DATA, page.MARKER, history_cache.NAME))
    data = data_of(site)
    assert len(data["runs"]) == 40 and len(data["series"]) == 90
    [step] = data["steps"]
    assert data["series"][step["s"]]["label"] == stepped.labels[history_runs.STEP_CASE]
    assert data["runs"][step["at"]]["f"] == "0025_main-25.json"
    assert data["runs"][step["before"]]["f"] == "0024_main-24.json"
    [machine] = data["machines"]
    latest = load_run(stepped.root / stepped.machine / "0040_main-40.json")
    assert data["runs"][machine["latest"]]["f"] == "0040_main-40.json"
    from pytest_mlbench.reporting import normalised

    assert [[g["group"], g["rows"]] for g in machine["groups"]] == [
        [group, rows] for group, rows in normalised.normalised_blocks(
            [r for _, r in latest.cases])]
    series = data["series"][0]
    assert len(series["v"]) == len(series["lo"]) == len(series["p"]) == 40
    assert all(lo <= v <= hi for lo, v, hi in zip(series["lo"], series["v"], series["hi"], strict=True))
    assert all(len(p) == 3 for p in series["p"])


def test_the_data_grows_with_the_runs_and_copies_no_record(
        stepped: history_runs.History, tmp_path: Path) -> None:
    files = sorted((stepped.root / stepped.machine).iterdir())
    sizes = {}
    for n in (10, 40):
        site = tmp_path / f"site{n}"
        assert cli.main(["report", "--html", str(site), *map(str, files[:n])]) == 0
        sizes[n] = (site / page.DATA).stat().st_size
        text = (site / page.DATA).read_text()
        # --html alone exits 0 with a step on the page (only --steps makes it a status)
        assert len(data_of(site)["steps"]) == (n == 40)
        assert '"passes"' not in text and '"checks"' not in text and '"identity"' not in text
    assert 2.5 < sizes[40] / sizes[10] < 4.0  # 4 for the series alone; the tables stay one run's
    runs_bytes = sum(f.stat().st_size for f in files)
    assert sizes[40] < runs_bytes / 5, (sizes[40], runs_bytes)


def test_a_folder_of_other_files_is_refused_and_left_alone(
        stepped: history_runs.History, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert cli.main(["report", "--html", str(tmp_path), str(stepped.root)]) == 2
    err = capsys.readouterr().err
    assert "holds files pytest-mlbench did not write" in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert (tmp_path / "notes.txt").read_text() == "mine"
    one = tmp_path / "a-file"
    one.write_text("x")
    assert cli.main(["report", "--html", str(one), str(stepped.root)]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_a_page_folder_is_rewritten_reading_only_its_new_runs(
        stepped: history_runs.History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder's cache keeps each run's digest under its file's hash: a build with four
    more runs reads those four, an edited run again, and gives the page a build without the
    cache gives; a cache that cannot be read is ignored."""
    files = sorted((stepped.root / stepped.machine).iterdir())[:12]
    site, fresh = tmp_path / "site", tmp_path / "fresh"
    read: list[int] = []
    real = history_cache.digests
    monkeypatch.setattr(history_cache, "digests", lambda paths, *a: read.append(len(paths))
                        or real(paths, *a))
    assert cli.main(["report", "--html", str(site), *map(str, files[:8])]) == 0
    edited = tmp_path / files[3].name
    edited.write_text(files[3].read_text().replace('"dirty": false', '"dirty": true'))
    again = [*files[:3], edited, *files[4:]]
    assert cli.main(["report", "--html", str(site), *map(str, again)]) == 0
    assert read == [8, 5]
    assert cli.main(["report", "--html", str(fresh), *map(str, again)]) == 0
    cached, plain = data_of(site), data_of(fresh)
    assert cached["series"] == plain["series"] and len(cached["runs"]) == 12
    assert [r["d"] for r in cached["runs"]] == [i == 3 for i in range(12)]
    (site / history_cache.NAME).write_text("{")
    assert cli.main(["report", "--html", str(site), *map(str, again)]) == 0
    assert read[-1] == 12 and data_of(site)["series"] == plain["series"]


def test_levels_weigh_runs_by_their_processes_spread() -> None:
    """A run of five processes weighs more than one of two, the host's drift being equal."""
    rng = np.random.default_rng(0)
    logs = [0.02 * rng.standard_normal(5 if i % 2 else 2) for i in range(30)]
    _, w = steps.levels(logs)
    assert w[1] > w[0]


def two_machines(folder: Path) -> Path:
    """Six runs of two cases on each of two machines (the second twice as fast)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, scale in (("A", 1.0), ("B", 0.5)):
        machine = {**MACHINE, "cpu": {**MACHINE["cpu"], "model": f"CPU {name}"}}
        for r in range(6):
            run = run_json(*(bench(record(impl, 1e-3 * scale * (1 + i), measure_kw={
                "seed": 10 * r + i, "processes": 3})) for i, impl in enumerate(
                    ("jax-jit", "torch-eager"))), machine=machine)
            run["commit_info"] = {"id": f"{r:x}" * 40, "time": f"2026-10-0{r + 1}T00:00:00"}
            write(folder / f"{name}{r}.json", run)
    return folder


def test_machines_are_series_of_one_case_side_by_side(tmp_path: Path) -> None:
    runs = two_machines(tmp_path / "runs")
    found = history.read([str(runs)], Path)
    assert [(s.label, s.machine) for s in found.series] == [
        ("mlp cpu fp32 jax-jit", "cpu-a-2c"), ("mlp cpu fp32 jax-jit", "cpu-b-2c"),
        ("mlp cpu fp32 torch-eager", "cpu-a-2c"), ("mlp cpu fp32 torch-eager", "cpu-b-2c")]
    a, b = found.series[:2]
    assert [p.figure for p in b.points] == pytest.approx([p.figure / 2 for p in a.points],
                                                         rel=0.1)
    assert a.points[0].normalised == 1.0 and found.series[2].points[0].normalised > 1.5


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


def test_many_files_are_read_in_worker_processes_alike(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Past PARALLEL_FROM files, spawned workers read them (one pool: each worker starts a
    Python and imports the package, seconds on a loaded host): the same digests."""
    paths = [write(tmp_path / f"{i}.json", run_json(bench(record(
        "jax-jit", 1e-3, measure_kw={"seed": i})))) for i in range(4)]
    monkeypatch.setattr(history, "PARALLEL_FROM", 2)
    assert history.digests(paths, workers=2) == history.digests(paths, workers=1)
