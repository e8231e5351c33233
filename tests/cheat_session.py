"""Runs the cheaters of tests/cheats/ through the real plugin and engine, in a pytest of its
own (a temporary folder holding a copy of them as its suites root), and reads each case's
outcome and message back from the session's JUnit XML."""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from tests.background import Command, Done

CHEATS = Path(__file__).resolve().parent / "cheats"
MODELS = Path(__file__).resolve().parents[1] / "suites"  # real workloads a cheat may start from
TIMEOUT_S = 900


@dataclass(frozen=True)
class Result:
    status: str  # passed, failed, skipped, error
    message: str


@dataclass(frozen=True)
class Session:
    results: dict[str, Result]  # by case name (noop-numpy-eager-cpu-fp32), or test_reference[noop]
    output: str
    folder: Path

    def __getitem__(self, case: str) -> Result:
        if case not in self.results:
            raise AssertionError(f"case {case} is not in the session; it ran "
                                 f"{sorted(self.results)}\n{self.output[-3000:]}")
        return self.results[case]


def make_folder(folder: Path) -> Path:
    """``folder`` as a project: suites/ (the workloads and a test module), conftest.py with
    the cheating adapters' hook, pytest.ini pointing mlbench_suites at suites/; models/, a copy
    of the project's suites outside the suites root, the honest implementations cheaters load
    (tests/cheats/specs.py's ``honest``) and change."""
    suites = folder / "suites"
    shutil.copytree(CHEATS, suites, ignore=shutil.ignore_patterns("__pycache__", "hooks.py",
                                                                  "session_module.py"))
    shutil.copy(CHEATS / "session_module.py", suites / "test_cheats.py")
    shutil.copy(CHEATS / "hooks.py", folder / "conftest.py")
    (folder / "pytest.ini").write_text("[pytest]\nmlbench_suites = suites\n")
    shutil.copytree(MODELS, folder / "models",  # the honest workloads cheaters load
                    ignore=shutil.ignore_patterns("__pycache__", "test_*.py"))
    return folder


def command(folder: Path, *args: str) -> Command:
    """One pytest session over the cheaters with ``args`` (a -k selection, timing options),
    its folder made."""
    make_folder(folder)
    return Command(["suites", "-p", "no:cacheprovider", "-q", "--mlbench-size=smoke",
                    f"--junitxml={folder / 'report.xml'}", "-o", "junit_family=xunit2", *args],
                   folder, timed="--benchmark-disable" not in args)


def read(done: Done) -> Session:
    """A session's outcomes from the JUnit XML it wrote in its folder."""
    report = done.folder / "report.xml"
    if not report.exists():
        raise AssertionError(f"the session wrote no report:\n{done.output}")
    return Session(parse(report), done.output, done.folder)


def run(folder: Path, *args: str) -> Session:
    """One pytest session over the cheaters, run now."""
    cmd = command(folder, *args)
    done = subprocess.run([sys.executable, "-m", "pytest", *cmd.args], cwd=folder,
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    return read(Done(done.returncode, done.stdout + done.stderr, folder))


def parse(report: Path) -> dict[str, Result]:
    out = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name", "")
        if "[" not in name:
            continue
        status, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            found = case.find(kind)
            if found is not None:
                status = {"failure": "failed"}.get(kind, kind)
                message = found.text or found.get("message") or ""
                break
        test, _, param = name[:-1].partition("[")
        out[param if test == "test_case" else f"{test}[{param}]"] = Result(status, message)
    return out
