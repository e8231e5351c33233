"""``pytest-mlbench report --steps`` and ``--html`` on generated histories of saved runs
(tests/history_runs.py: 40 runs x 90 cases written by the project's own writers); the page
is opened in a real browser by test_history_page.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from pytest_mlbench import cli
from pytest_mlbench.reporting import history, history_cache, page, steps
from pytest_mlbench.storing.runs import load_run
from tests import history_runs
from tests.history_runs import Built, data_of, two_machines
from tests.synthetic import bench, record, run_json, write


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


def test_many_files_are_read_in_worker_processes_alike(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Past PARALLEL_FROM files, spawned workers read them (one pool: each worker starts a
    Python and imports the package, seconds on a loaded host): the same digests."""
    paths = [write(tmp_path / f"{i}.json", run_json(bench(record(
        "jax-jit", 1e-3, measure_kw={"seed": i})))) for i in range(4)]
    monkeypatch.setattr(history, "PARALLEL_FROM", 2)
    assert history.digests(paths, workers=2) == history.digests(paths, workers=1)
