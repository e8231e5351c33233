"""Baselines: saved through pytest-benchmark's storage with raw rounds, never clobbered or half
written, and a bad file is one line naming it (pytest usage error, CLI exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_mlbench import cli, fingerprint
from pytest_mlbench.baseline import BaselineError, BaselineStorage, load_run
from tests.test_gate import BENCH_MODULE, bench_json, run_json


def saved(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.json"))


def test_save_load_round_trip(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fast=BENCH_MODULE)
    result = pytester.runpytest("--mlbench-save=main", "--mlbench-baselines=bl")
    assert result.ret == 0
    (path,) = saved(pytester.path / "bl")
    result.stdout.fnmatch_lines([f"mlbench: saved baseline {path}"])
    assert path.name == "0001_main.json" and path.parent.name == fingerprint.machine_id(
        {"mlbench": load_run(path)["machine_info"]["mlbench"]})
    (bench,) = load_run(path)["benchmarks"]
    assert bench["fullname"] == "test_fast.py::test_fast" and len(bench["stats"]["data"]) == 20
    assert "mlbench" in load_run(path)["machine_info"]
    # pytest-benchmark's own command reads it
    listing = subprocess.run([sys.executable, "-m", "pytest_benchmark", "--storage",
                              str(pytester.path / "bl"), "compare", f"{path.parent.name}/*main"],
                             capture_output=True, text=True, cwd=pytester.path)
    assert listing.returncode == 0 and "test_fast" in listing.stdout


def test_refuses_to_overwrite_unless_asked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fast=BENCH_MODULE)
    assert pytester.runpytest("--mlbench-save=main", "--mlbench-baselines=bl").ret == 0
    (path,) = saved(pytester.path / "bl")
    before = path.read_bytes()
    refused = pytester.runpytest("--mlbench-save=main", "--mlbench-baselines=bl")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"ERROR: {path}: baseline 'main' exists; pass "
                                  "--mlbench-save-mode=overwrite to replace it"])
    assert path.read_bytes() == before
    again = pytester.runpytest("--mlbench-save=main", "--mlbench-baselines=bl",
                               "--mlbench-save-mode=overwrite")
    assert again.ret == 0 and saved(pytester.path / "bl") == [path]
    assert path.read_bytes() != before


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    storage = BaselineStorage(tmp_path, "m")
    path = storage.save_run(run_json(bench_json("t.py::a", [1.0, 2.0])), "main", overwrite=False)
    before = path.read_bytes()

    def power_cut(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", power_cut)
    with pytest.raises(OSError, match="disk full"):
        storage.save_run(run_json(bench_json("t.py::b", [3.0, 4.0])), "main", overwrite=True)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["0001_main.json"]  # no temp left


GOOD = json.dumps(run_json(bench_json("test_fast.py::test_fast", [1.0] * 5)))
BAD_FILES = {
    "truncated": GOOD[: len(GOOD) // 2],
    "not-json": "<html>502 Bad Gateway</html>",
    "wrong-shape": json.dumps({"benchmarks": [{"name": "x"}]}),
    "bad-rounds": GOOD.replace("[1.0, 1.0, 1.0, 1.0, 1.0]", '["1", null]'),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_bad_baseline_is_one_line_naming_the_file(pytester: pytest.Pytester, kind: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = pytester.path / f"{kind}.json"
    path.write_text(BAD_FILES[kind])
    with pytest.raises(BaselineError, match=str(path)):
        load_run(path)
    result = pytester.runpytest(f"--mlbench-gate={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: --mlbench-gate: {path}: ")
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    capsys.readouterr()
    assert cli.main(["report", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"mlbench: error: {path}: ")


def test_names_resolve_per_machine_and_list_what_exists(tmp_path: Path) -> None:
    storage = BaselineStorage(tmp_path, "m1")
    path = storage.save_run(run_json(), "main", overwrite=False)
    assert storage.resolve("main") == path
    assert BaselineStorage(tmp_path, "m2").resolve("m1/main") == path
    with pytest.raises(BaselineError, match=r"no baseline named 'pr' \(available: main\)"):
        storage.resolve("pr")


def test_fingerprint_ignores_volatile_facts_and_lists_differences() -> None:
    info = run_json()["machine_info"]
    noisy = json.loads(json.dumps(info))
    noisy.update({"node": "other-host", "cpu": {"hz_actual": [3.1e9, 0]}})
    assert fingerprint.fingerprint(noisy) == fingerprint.fingerprint(info)
    noisy["mlbench"]["packages"] = {"jax": "0.5"}
    assert fingerprint.differences(fingerprint.fingerprint(info),
                                   fingerprint.fingerprint(noisy)) == ["version.jax: (absent) -> 0.5"]
    assert fingerprint.machine_id(info) == "test-cpu-2c"
