"""The same-machine A/B gate: refused before the run when it cannot work, one line each; a real
session against a base revision in a git worktree; verdicts that never call "nothing judged"
a pass. The sessions use a toy NumPy workload (tens of microseconds a call) whose slow version
busy-waits a fixed millisecond a step, about sixty times its work: an effect no shared machine can
hide, so no assertion depends on how fast anything is. (A wait proportional to the step's own
time was not enough: on a noisy host a descheduled step stretched its own wait too, and three
processes' ratios spread from 11x to 60x, too far apart for the paired test at 1%.)"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from pytest_mlbench.judging import ab
from pytest_mlbench.measuring.outcome import Outcome
from pytest_mlbench.storing.record import Identity, Measure, Record
from tests import background
from tests.background import Command
from tests.synthetic import toy_spec

TEST_MODULE = """
def test_case(mlbench_case, benchmark):
    mlbench_case.run(benchmark)
"""

SPEC = toy_spec('{s: (Shape({"n": 64}, steps_per_call=5),) for s in ("smoke", "default", "paper")}',
                '{"numpy": ("eager",)}')

IMPL = """
import time

class Trainer:
    def __init__(self, case):
        self.w, self.d, self.lr = case.params["w"], case.data, case.learning_rate
    def params(self):
        return {"w": self.w}
    def loss_and_grads(self):
        r = self.d["x"] @ self.w - self.d["y"]
        return 0.5 * (r * r).mean(), {"w": self.d["x"].T @ r / len(r)}
    def step(self):
        loss, g = self.loss_and_grads()
        self.w = self.w - self.lr * g["w"]
        end = time.perf_counter() + SLOW_S
        while time.perf_counter() < end:
            pass
        return loss

def build(case):
    return Trainer(case)
"""

BASE = ("-p", "no:cacheprovider", "--mlbench-size=smoke", "--benchmark-max-time=0.05")
ARGS = (*BASE, "--mlbench-processes=3")
# the sessions whose verdict is asserted: five processes put a busy host's spread of the base's
# tens of microseconds well inside the paired test (p ~1e-6 with one core busy; 6e-4 to 2e-3
# with three processes)
JUDGED = (*BASE, "--mlbench-processes=5")


SLOW = 1e-3  # seconds busy a step in the slow version


def toy(pytester: pytest.Pytester, slow_s: float) -> None:
    pytester.makepyfile(**{"suites/test_toy_ab": TEST_MODULE,
                           "suites/toy/spec": SPEC,
                           "suites/toy/impl_numpy": f"SLOW_S = {slow_s}\n{IMPL}"})


def git(path: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


def committed_toy(pytester: pytest.Pytester, base: float, head: float) -> None:
    """The base revision's toy committed, the head's in the working tree."""
    toy(pytester, base)
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-q", "-m", "base")
    toy(pytester, head)


def toy_in(folder: Path, slow_s: float) -> None:
    """``toy`` written into a plain folder (a background session's, tests/background.py)."""
    files = {"suites/test_toy_ab.py": TEST_MODULE, "suites/toy/spec.py": SPEC,
             "suites/toy/impl_numpy.py": f"SLOW_S = {slow_s}\n{IMPL}"}
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())


def committed_in(folder: Path, base: float, head: float) -> None:
    toy_in(folder, base)
    commit(folder, "base")
    toy_in(folder, head)


def commit(folder: Path, message: str) -> None:
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", message)


# the three A/B sessions, timed, run in the background beside the in-process tests
@background.session("ab_slower")
def slower_command(folder: Path) -> Command:
    committed_in(folder, base=0.0, head=SLOW)
    return Command(["suites", "--mlbench-ab=HEAD", f"--benchmark-json={folder / 'ab.json'}",
                    *JUDGED], folder, timed=True)


@background.session("ab_faster")
def faster_command(folder: Path) -> Command:
    committed_in(folder, base=SLOW, head=0.0)
    return Command(["suites", "--mlbench-ab=HEAD", *JUDGED], folder, timed=True)


@background.session("ab_missing")
def missing_command(folder: Path) -> Command:
    (folder / "README.py").write_text("")
    commit(folder, "before the workload existed")
    # the slow toy: nothing here depends on its speed, and at its bare ~0.07 ms a call each
    # pass's float64 references replayed ~30 times the steps (14-15 CPU-s a session, 5-6 now)
    toy_in(folder, SLOW)
    return Command(["suites", "--mlbench-ab=HEAD", *ARGS], folder, timed=True)


@pytest.fixture
def ab_slower(tmp_path_factory: pytest.TempPathFactory) -> background.Done:
    return background.result("ab_slower", tmp_path_factory)


@pytest.fixture
def ab_faster(tmp_path_factory: pytest.TempPathFactory) -> background.Done:
    return background.result("ab_faster", tmp_path_factory)


@pytest.fixture
def ab_missing(tmp_path_factory: pytest.TempPathFactory) -> background.Done:
    return background.result("ab_missing", tmp_path_factory)


def lines(done: background.Done) -> pytest.LineMatcher:
    return pytest.LineMatcher(done.output.splitlines())


def last_line(done: background.Done) -> str:
    """pytest's final line, without its rule and seconds: ``1 failed, 1 passed``."""
    finals = [line for line in done.output.splitlines()
              if re.fullmatch(r"=+ .+ in [0-9.]+s( \(.*\))? =+", line)]
    assert finals, done.output
    return finals[-1].strip("= ").rsplit(" in ", 1)[0]


def test_a_slower_head_fails_the_session(ab_slower: background.Done) -> None:
    assert ab_slower.returncode == pytest.ExitCode.TESTS_FAILED, ab_slower.output
    lines(ab_slower).fnmatch_lines(["*mlbench A/B against HEAD (*",
                                    "*toy-numpy-eager-cpu-fp32*SLOWER*",
                                    "mlbench A/B: FAILED: 1 of 1 judged*",
                                    "FAILED mlbench ab gate - 1 of 1 judged benchmarks slower*"])
    assert last_line(ab_slower).startswith("1 failed, 1 passed"), ab_slower.output
    rows = json.loads((ab_slower.folder / "ab.json").read_text())["mlbench_ab"]
    assert rows[0]["verdict"] == "SLOWER" and rows[0]["change"] > 1.0


def test_a_faster_head_passes(ab_faster: background.Done) -> None:
    assert ab_faster.returncode == pytest.ExitCode.OK, ab_faster.output
    lines(ab_faster).fnmatch_lines(["*toy-numpy-eager-cpu-fp32*faster*",
                                    "mlbench A/B: passed (1 judged*"])
    assert last_line(ab_faster).startswith("1 passed"), ab_faster.output


def test_a_case_missing_from_the_base_is_not_judged_and_nothing_judged_fails(
        ab_missing: background.Done) -> None:
    assert ab_missing.returncode == pytest.ExitCode.TESTS_FAILED, ab_missing.output
    lines(ab_missing).fnmatch_lines(["*not in the base revision*",
                                     "mlbench A/B: nothing judged*"])
    assert last_line(ab_missing).startswith("1 failed, 1 passed"), ab_missing.output


@pytest.mark.parametrize(("value", "message"), [
    ("no-such-ref", "git does not know the revision 'no-such-ref' here*"),
    ("python:/nonexistent/python", "*/nonexistent/python is not a file*"),
])
def test_bad_base_is_one_line_usage_error(pytester: pytest.Pytester, value: str,
                                          message: str) -> None:
    toy(pytester, 0.0)
    git(pytester.path, "init", "-q")
    result = pytester.runpytest("suites", f"--mlbench-ab={value}", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --mlbench-ab: {message}"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_ab_outside_a_git_repository_is_refused(pytester: pytest.Pytester) -> None:
    toy(pytester, 0.0)
    result = pytester.runpytest("suites", "--mlbench-ab=main", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --mlbench-ab: * is not in a git repository"])


def test_ab_without_timing_is_refused_before_the_run(pytester: pytest.Pytester) -> None:
    committed_toy(pytester, base=0.0, head=0.0)
    result = pytester.runpytest("suites", "--mlbench-ab=HEAD", "--benchmark-disable", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --mlbench-ab: refused: --benchmark-disable*"])


# -- verdicts -------------------------------------------------------------------------------

def record(passes: list[list[float]], workload: str = "toy") -> Record:
    ident = Identity(workload, "", {"n": 1}, "sgd", "train", "numpy", "eager", "cpu", "fp32",
                     "float32", threads=2, data_sha256="abc")
    return Record(ident, "toy-numpy-eager-cpu-fp32",
                  Measure(1, tuple(tuple(p) for p in passes)))


def test_verdicts_say_why_a_case_was_not_judged() -> None:
    head = Outcome("passed", record=record([[1.0, 1.1], [1.0, 1.2]]))
    assert "not in the base" in ab.compare("c", None, head, threshold=0.1, alpha=0.01).verdict
    failed = Outcome("failed", "numpy eager (c): gradient of w differs\nmore")
    row = ab.compare("c", failed, head, threshold=0.1, alpha=0.01)
    assert row.verdict == "base failed: numpy eager (c): gradient of w differs"
    one = Outcome("passed", record=record([[1.0, 1.1]]))
    assert ab.compare("c", one, head, threshold=0.1, alpha=0.01).verdict.startswith(
        "inconclusive")
    other = Outcome("passed", record=record([[1.0], [1.0]], workload="else"))
    assert ab.compare("c", other, head, threshold=0.1, alpha=0.01).verdict.startswith(
        "not comparable: workload")
