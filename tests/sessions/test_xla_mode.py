"""torch's xla mode through the real plugin and engine.

Without torch_xla (the test line's environment): the main job's vit and gpt xla cases skip
with one line naming the job that installs it. With it (``tox exec -e bench-xla -- python -m
pytest tests/sessions/test_xla_mode.py``): the honest least squares passes in the xla mode,
and tests/xla's broken ones fail, each naming what it did (a recompile while timed, a host read
mid-step, a copy to the host every step, results left on the host)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cheat_session import Session, make_folder, parse

ROOT = Path(__file__).resolve().parents[2]
XLA_CASES = ROOT / "tests" / "xla"
XLA = importlib.util.find_spec("torch_xla") is not None
TIMEOUT_S = 900


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=TIMEOUT_S, check=False)


@pytest.mark.skipif(XLA, reason="torch_xla is installed here: its cases run (tests below)")
def test_without_torch_xla_the_main_jobs_xla_cases_skip_naming_the_job() -> None:
    done = run(["suites", "-p", "no:cacheprovider", "-q", "-rs", "--benchmark-disable",
                "-m", "mlbench_main", "-k", "(vit- or gpt-) and torch-xla"], ROOT)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "2 skipped" in out, out[-3000:]
    reasons = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert reasons == ["SKIPPED [2] suites/test_workloads.py: torch's xla mode needs torch_xla, "
                       "which is not installed: tox -e bench-xla installs it with the torch it "
                       "was built against (constraints-xla.txt)"], out[-3000:]


@pytest.fixture(scope="module")
def xla_session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    """The tests/xla folders beside the cheats (whose specs.py they use), their xla cases
    only, nothing timed."""
    if not XLA:
        pytest.skip("torch_xla is not installed: tox exec -e bench-xla -- python -m pytest "
                    "tests/sessions/test_xla_mode.py")
    folder = make_folder(tmp_path_factory.mktemp("xla"))
    for case in XLA_CASES.iterdir():
        if case.is_dir() and case.name.startswith("xla"):
            shutil.copytree(case, folder / "suites" / case.name)
    shutil.copy(XLA_CASES / "xla_honest.py", folder / "suites" / "xla_honest.py")
    report = folder / "report.xml"
    done = run(["suites", "-p", "no:cacheprovider", "-q", "--mlbench-size=smoke",
                "--benchmark-disable", "--mlbench-threads=1", "-k", "torch-xla",
                f"--junitxml={report}", "-o", "junit_family=xunit2"], folder)
    if not report.exists():
        raise AssertionError(f"the session wrote no report:\n{done.stdout + done.stderr}")
    return Session(parse(report), done.stdout + done.stderr, folder)


def case(name: str) -> str:
    return f"{name}-torch-xla-cpu-fp32"


def test_the_honest_step_passes_in_the_xla_mode(xla_session: Session) -> None:
    found = xla_session[case("xlahonest")]
    assert found.status == "passed", found.message


@pytest.mark.parametrize(("name", "pattern"), [
    ("xlaretrace", r"compiled during timing: \d+ new trace\(s\) or compilation\(s\)"),
    ("xlaitem", r"_train_step ran part of its graph before its end .*: something "
                r"read a value on the host mid-step"),
    ("xlahost", r"_train_step copied \d+ tensor\(s\) from the XLA device to the host"),
    ("xlaresults", r"params\(\) 'w' is not on the case's device \(cpu\)"),
])
def test_a_broken_xla_step_fails_saying_what_it_did(xla_session: Session, name: str,
                                                    pattern: str) -> None:
    found = xla_session[case(name)]
    assert found.status == "failed", f"{name}: {found.status}\n{xla_session.output[-3000:]}"
    assert f"torch xla ({case(name)})" in found.message, found.message
    assert re.search(pattern, found.message), found.message
