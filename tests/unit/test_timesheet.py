"""Where a run's seconds went (pytest_mlbench/timesheet.py): nested activities charged once,
per thread and account, and the saved sheet shown by ``pytest-mlbench report RUN --time``."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pytest_mlbench import cli, timesheet
from pytest_mlbench.timesheet import Timesheet, account, charge, spend
from tests.synthetic import bench, record, run_json, write


def spent(sheet: Timesheet, what: str, framework: str = "torch", p: int = 0) -> float:
    return sheet.seconds.get((p, framework, what), 0.0)


def test_a_nested_activity_is_charged_once_to_the_innermost() -> None:
    sheet = Timesheet()
    with account(sheet, 0, "torch"):
        with spend("checks_before"):
            time.sleep(0.02)
            with spend("references"):
                time.sleep(0.05)
    assert spent(sheet, "references") >= 0.05
    assert 0.02 <= spent(sheet, "checks_before") < 0.045  # less the nested 0.05
    # the outer's wall is the sum of the two: nothing lost, nothing counted twice
    assert spent(sheet, "checks_before") + spent(sheet, "references") < 0.1


def test_seconds_measured_elsewhere_move_from_the_block_that_held_them() -> None:
    sheet = Timesheet()
    with account(sheet, 1, "jax"), spend("turns"):
        time.sleep(0.03)
        charge("timed", 0.02, instead_of="turns")
    assert spent(sheet, "timed", "jax", 1) == 0.02
    assert 0.01 <= spent(sheet, "turns", "jax", 1) < 0.03


def test_threads_charge_their_own_accounts_and_none_outside_one() -> None:
    sheet = Timesheet()

    def job(framework: str) -> None:
        with account(sheet, 0, framework), spend("build"):
            time.sleep(0.02)

    threads = [threading.Thread(target=job, args=(fw,)) for fw in ("jax", "torch")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with spend("build"):  # no account on this thread: nothing charged
        time.sleep(0.01)
    assert spent(sheet, "build", "jax") >= 0.02 and spent(sheet, "build", "torch") >= 0.02
    assert set(sheet.seconds) == {(0, "jax", "build"), (0, "torch", "build")}


def test_a_run_cut_short_says_what_was_still_running() -> None:
    """A borrowed GPU machine's window cut a timed session with nothing in its table to say
    where it hung: the sheet names each thread's innermost open activity, and forgets it as
    it ends."""
    sheet = Timesheet()
    inside, release = threading.Event(), threading.Event()

    def stuck() -> None:
        with account(sheet, 0, "jax"), spend("turns"), spend("peaks"):
            inside.set()
            release.wait(5)

    thread = threading.Thread(target=stuck)
    thread.start()
    inside.wait(5)
    time.sleep(0.02)
    running = sheet.to_json()["in_flight"]
    assert [(f["pass"], f["framework"], f["activity"]) for f in running] == [(1, "jax", "peaks")]
    assert running[0]["seconds"] >= 0.02
    line = [x for x in timesheet.lines(sheet.to_json()) if x.startswith("still running")]
    assert line == [f"still running as the run ended: pass 1, jax: matmul peaks for "
                    f"{running[0]['seconds']:.1f} s"]
    release.set()
    thread.join()
    assert "in_flight" not in sheet.to_json()  # a run that ended has nothing in flight


def test_an_unknown_activity_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown activity 'compiling': one of start, build"):
        Timesheet().add(0, "jax", "compiling", 1.0)


def sheet_json() -> dict[str, object]:
    sheet = Timesheet()
    for p in (0, 1):
        sheet.add(p, "jax", "compile", 4.0 - p * 3)
        sheet.add(p, "jax", "timed", 1.5)
        sheet.add(p, timesheet.HARNESS, "peaks", 0.5)
        sheet.walls[(p, "untimed")] = 6.0
    return sheet.to_json()


def test_the_tables_show_each_pass_and_each_framework() -> None:
    lines = timesheet.lines(sheet_json())
    text = "\n".join(lines)
    assert lines[0].split()[-3:] == ["1", "2", "all"] or "pass 1" in lines[0]
    compile_row = next(line for line in lines if line.startswith("compilation"))
    assert compile_row.split()[-3:] == ["4.0", "1.0", "5.0"]
    assert "wall: untimed phases (jobs side by side)" in text
    assert any(line.startswith("harness (no framework's)") for line in lines)
    jax_row = next(line for line in lines if line.startswith("jax"))
    assert jax_row.split()[-1] == "8.0"  # 5.0 compiling + 3.0 timed


def test_report_time_prints_a_saved_runs_sheet(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(bench(record("jax-jit", 1e-3)))
    data["machine_info"].setdefault("mlbench", {})["time_spent"] = sheet_json()
    assert cli.main(["report", str(write(tmp_path / "run.json", data)), "--time"]) == 0
    out = capsys.readouterr().out
    assert "where the time went (seconds):" in out and "timed rounds (recorded)" in out


def test_report_time_says_when_a_run_has_no_sheet_and_refuses_a_malformed_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(bench(record("jax-jit", 1e-3)))
    assert cli.main(["report", str(write(tmp_path / "old.json", data)), "--time"]) == 0
    assert "where the time went: not recorded in this run" in capsys.readouterr().out
    data["machine_info"].setdefault("mlbench", {})["time_spent"] = {
        "passes": [{"pass": 1, "frameworks": {"jax": {"timed": "soon"}}}]}
    assert cli.main(["report", str(write(tmp_path / "bad.json", data)), "--time"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "time_spent is malformed" in err[0]


def test_report_time_goes_with_one_run_only(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "run.json", run_json(bench(record("jax-jit", 1e-3))))
    assert cli.main(["report", "--compare", str(path), str(path), "--time"]) == 2
    assert "--time is for one run's report" in capsys.readouterr().err


@pytest.mark.parametrize("sheet", [
    {"passes": [{}]},
    {"passes": [{"pass": 1, "frameworks": {"jax": {"build": 2.0}}}, {"pass": 2}]},
    {"passes": [{"pass": 1, "phases": {}, "frameworks": {"jax": {}}}]},
])
def test_report_time_of_a_sheet_with_an_empty_pass_says_so_and_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sheet: dict[str, object]) -> None:
    """A session's sheet never holds a pass with nothing in it: one printed as a table of
    zeros, exit 0, as if the pass had cost nothing."""
    data = run_json(bench(record("jax-jit", 1e-3)))
    data["machine_info"].setdefault("mlbench", {})["time_spent"] = sheet
    assert cli.main(["report", str(write(tmp_path / "run.json", data)), "--time"]) == 2
    out, err = capsys.readouterr()
    assert "where the time went" not in out and len(err.strip().splitlines()) == 1
    assert "recorded no seconds (no activity, no phase)" in err and "pass " in err


@pytest.mark.parametrize(("sheet", "shown"), [
    ({"passes": [{"pass": 1, "frameworks": {"jax": {"build": 2.0}}},
                 {"pass": 2, "phases": {"probe": 0.5}}]},
     "build (less compilation) 2.0 0.0 2.0"),
    ({"passes": [], "in_flight": [{"pass": 1, "framework": "jax", "activity": "build",
                                   "seconds": 41.3}]},
     "still running as the run ended: pass 1, jax: build (less compilation) for 41.3 s"),
    ({"passes": []}, "nothing was recorded (the run ended before its first pass)"),
])
def test_report_time_reads_every_sheet_a_run_can_hold(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sheet: dict[str, object],
        shown: str) -> None:
    data = run_json(bench(record("jax-jit", 1e-3)))
    data["machine_info"].setdefault("mlbench", {})["time_spent"] = sheet
    assert cli.main(["report", str(write(tmp_path / "run.json", data)), "--time"]) == 0
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert " ".join(shown.split()) in lines


def test_the_timed_work_not_recorded_is_set_beside_the_recorded_by_pass() -> None:
    sheet = timesheet.Timesheet()
    passes = [(1.0, 0.5, 1.0, 0.5), (0.5, 0.25, 0.5, 0.25)]
    for p, (warmup, dropped, turns, audits) in enumerate(passes):
        sheet.add(p, "numpy", "timed", 2.0)
        sheet.add(p, "numpy", "warmup", warmup)
        sheet.add(p, "numpy", "dropped", dropped)
        sheet.add(p, "numpy", "turns", turns)
        sheet.add(p, "numpy", "audits", audits)
        sheet.add(p, "numpy", "peaks", 9.0)  # not a round: not in the ratio
        sheet.add(p, "numpy", "references", 9.0)  # untimed
        sheet.walls[(p, "timed")] = 5.0
    row = next(line for line in timesheet.lines(sheet.to_json())
               if line.startswith("timed work not recorded"))
    assert row.split()[-3:] == ["1.50", "0.75", "1.12"]
    # the same rounds in a session that times nothing (its one audited round run untimed)
    untimed = sheet.to_json()
    for one in untimed["passes"]:
        one["phases"] = {"untimed": 5.0}
    assert not any(line.startswith("timed work not recorded")
                   for line in timesheet.lines(untimed))


def test_a_sheet_that_timed_nothing_has_no_ratio() -> None:
    assert not any(line.startswith("timed work not recorded")
                   for line in timesheet.lines(sheet_json() | {"passes": [
                       {"pass": 1, "frameworks": {"numpy": {"compile": 1.0}}}]}))
