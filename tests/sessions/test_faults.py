"""Faults of an implementation in a real session: each is one line naming what happened (how
the worker ended, the command, the case) and what to do, never a harness traceback, and what
the implementation started dies with its worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.sessions.test_collection import make_suite

FAULTY_NUMPY = """
import os, signal, subprocess, sys, time
FAULT = {fault!r}

class Trainer:
    def __init__(self, case):
        self.w, self.d = case.params["w"], case.data  # each step reads its batch
        self.lr = case.learning_rate
        self.n = 0
    def params(self):
        return {{"w": self.w}}
    def loss_and_grads(self):
        r = self.d["x"] @ self.w - self.d["y"]
        return 0.5 * (r * r).mean(), {{"w": self.d["x"].T @ r / len(r)}}
    def step(self):
        self.n += 1
        if self.n == 5:
            if FAULT == "segv": os.kill(os.getpid(), signal.SIGSEGV)
            if FAULT == "exit0": os._exit(0)
            if FAULT == "interrupt": raise KeyboardInterrupt
            if FAULT == "raise": raise ZeroDivisionError("deliberate")
        loss, g = self.loss_and_grads()
        self.w = self.w - self.lr * g["w"]
        return loss

def build(case):
    if FAULT == "setsid":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                 start_new_session=True)
        with open({pidfile!r}, "w") as f:
            f.write(str(child.pid))
    if FAULT == "none":
        return None
    if FAULT == "stuck":  # a child of its own, then the worker waits: the session is killed
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                 start_new_session=True)
        with open({pidfile!r} + ".tmp", "w") as f:
            f.write(f"{{os.getpid()}} {{child.pid}} {{os.environ['TMPDIR']}}")
        os.rename({pidfile!r} + ".tmp", {pidfile!r})
        time.sleep(600)
    return Trainer(case)
"""


def _session(pytester: pytest.Pytester, fault: str) -> pytest.RunResult:
    make_suite(pytester)
    pidfile = str(pytester.path / "child.pid")
    impl = pytester.path / "suites" / "toy" / "impl_numpy.py"
    impl.write_text(FAULTY_NUMPY.format(fault=fault, pidfile=pidfile))
    return pytester.runpytest_subprocess("suites", "--benchmark-disable", "--mlbench-size=smoke",
                                         "--mlbench-threads=1", "-k", "train_step")


@pytest.mark.parametrize(("fault", "said"), [
    ("segv", r"*toy-numpy-eager-cpu-fp32: the worker failed: worker 0 (pid *) exited with "
             r"signal 11 (SIGSEGV) without answering 'case *'*PYTHONFAULTHANDLER=1*"),
    ("exit0", "*toy-numpy-eager-cpu-fp32: the worker failed: worker 0 (pid *) exited with code "
              "0 without answering 'case *'*os._exit or sys.exit*"),
    ("interrupt", "*toy-numpy-eager-cpu-fp32: the worker failed: worker 0 (pid *) raised "
                  "KeyboardInterrupt (at *impl_numpy.py:* in step) while running 'case *'"),
    ("none", "*toy-numpy-eager-cpu-fp32: *build(case) returned None; it must return an "
             "object with params(), loss_and_grads(), step()*"),
])
def test_a_fault_of_the_implementation_is_one_line_without_a_harness_traceback(
        pytester: pytest.Pytester, fault: str, said: str) -> None:
    result = _session(pytester, fault)
    result.stdout.fnmatch_lines([said])
    out = result.stdout.str()
    assert "Traceback" not in out and "assert None is not None" not in out
    assert "pytest_mlbench/" not in out.split("FAILURES")[-1]
    result.assert_outcomes(failed=1)


def test_the_implementations_own_frames_are_all_its_traceback_shows(
        pytester: pytest.Pytester) -> None:
    result = _session(pytester, "raise")
    result.stdout.fnmatch_lines(["*the implementation raised ZeroDivisionError: deliberate",
                                 "Traceback (most recent call last):",
                                 '  File "*impl_numpy.py", line *, in step'])
    assert "pytest_mlbench/" not in result.stdout.str().split("FAILURES")[-1]


def test_a_child_that_build_starts_in_its_own_session_dies_with_its_worker(
        pytester: pytest.Pytester) -> None:
    result = _session(pytester, "setsid")
    result.assert_outcomes(passed=1)
    child = int((pytester.path / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while psutil.pid_exists(child) and psutil.Process(child).status() != "zombie":
        assert time.monotonic() < deadline, f"build()'s child {child} outlived the session"
        time.sleep(0.05)


@pytest.mark.parametrize(("edit", "said"), [
    (("make_data=lambda rng, d: {", "make_data=lambda rng, d: 1 / 0 or {"),
     "toy: SPEC.make_data(rng, {'n': 16}) raised ZeroDivisionError: division by zero at "
     "*spec.py:*"),
    (('make_params=lambda rng, d: {"w": rng.standard_normal((3, 1))}',
      "make_params=lambda rng, d: [1, 2]"),
     "toy: SPEC.make_params(rng, {'n': 16}) returned list; it must return a dict of NumPy "
     "arrays by name"),
])
def test_a_spec_function_that_raises_or_returns_the_wrong_thing_is_one_line(
        pytester: pytest.Pytester, edit: tuple[str, str], said: str) -> None:
    make_suite(pytester)
    spec = pytester.path / "suites" / "toy" / "spec.py"
    spec.write_text(spec.read_text().replace(*edit))
    result = pytester.runpytest("suites", "--benchmark-disable", "--mlbench-size=smoke",
                                "--mlbench-threads=1")
    # found as the suites are discovered: the folder's failing case, naming its spec file
    result.stdout.fnmatch_lines(["*test_train_step[[]toy-invalid[]]*",
                                 "workload folder toy breaks 1 rule(s) of ADDING_WORKLOADS.md:",
                                 f"  */suites/toy/spec.py: {said}"])
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "Traceback" not in out and "During handling" not in out and "workloads/data.py" not in out


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def default_signals() -> None:
    """In the session's child: the signals the test sends at their defaults, whatever the test
    runner inherited (a run under nohup ignores SIGHUP, a background job SIGINT, and a child
    would inherit that and never end)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT])
def test_a_killed_session_leaves_no_process_or_temp_folder_behind(
        pytester: pytest.Pytester, how: signal.Signals) -> None:
    make_suite(pytester)
    pidfile = pytester.path / "child.pid"
    impl = pytester.path / "suites" / "toy" / "impl_numpy.py"
    impl.write_text(FAULTY_NUMPY.format(fault="stuck", pidfile=str(pidfile)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", "suites", "--benchmark-disable", "--mlbench-size=smoke",
         "--mlbench-threads=1", "-k", "train_step", "-p", "no:cacheprovider"],
        cwd=pytester.path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=default_signals)
    deadline = time.monotonic() + 120
    while not pidfile.exists():
        assert session.poll() is None, "the session ended before the worker built the case"
        assert time.monotonic() < deadline, "the worker never reached build()"
        time.sleep(0.1)
    worker, child, tmp = pidfile.read_text().split()
    assert Path(tmp).name.startswith(f"mlbench-session-{session.pid}-") and Path(tmp).is_dir()
    session.send_signal(how)
    sent = time.monotonic()
    try:
        session.wait(60)
    finally:
        if session.poll() is None:
            session.kill()
    # the session ends by itself, promptly, though its worker is stuck in build(): the
    # campaign is cancelled and its workers killed (tests/unit/test_session.py: Ctrl-C while
    # the main thread waits on the campaign)
    assert session.returncode != -signal.SIGKILL or how == signal.SIGKILL, (
        f"the session did not end within 60 s of {how.name}")
    assert time.monotonic() - sent < 30.0, f"the session took {time.monotonic() - sent:.0f} s"
    deadline = time.monotonic() + 15
    while not (_gone(int(worker)) and _gone(int(child)) and not Path(tmp).exists()):
        assert time.monotonic() < deadline, (
            f"left behind: worker {worker} alive={not _gone(int(worker))}, its child {child} "
            f"alive={not _gone(int(child))}, {tmp} exists={Path(tmp).exists()}")
        time.sleep(0.1)
