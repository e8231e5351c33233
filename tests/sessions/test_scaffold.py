"""``pytest-mlbench init`` in a user's own project, outside this repository: what it refuses
to overwrite, and the one line a configured suites folder gets when no test runs it. That the
project it sets up checks, times and A/B-gates its example: tests/sessions/test_wheel.py, from
the installed wheel (one set of sessions for both). Each configuration layout, every refusal
and --example: tests/unit/test_init_config.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_mlbench import cli


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only the installed plugin
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=project, capture_output=True, text=True, env=env, timeout=300)


def test_init_overwrites_nothing_and_says_so_in_one_line(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["init", str(tmp_path)]) == 0
    capsys.readouterr()
    before = {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
    assert cli.main(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "already exist" in err and "nothing was written" in err
    assert {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("bad", ["../outside", "/abs/path", "a b", ""])
def test_init_refuses_a_suites_folder_outside_the_project(tmp_path: Path, bad: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["init", str(tmp_path), "--suites", bad]) == 2
    assert "give a folder path inside the project" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_configured_suites_folder_that_no_test_runs_gets_one_line(tmp_path: Path) -> None:
    assert cli.main(["init", str(tmp_path)]) == 0
    (tmp_path / "benchmarks" / "test_workloads.py").unlink()
    (tmp_path / "benchmarks" / "test_control.py").unlink()
    (tmp_path / "test_other.py").write_text("def test_other():\n    pass\n")
    found = _pytest(tmp_path)
    lines = [line for line in found.stdout.splitlines() if line.startswith("mlbench:")]
    assert len(lines) == 1 and "holds 1 workload(s) (example)" in lines[0], found.stdout
    (tmp_path / "pytest.ini").unlink()  # the plugin was never configured: not a word from it
    assert "mlbench" not in _pytest(tmp_path).stdout
