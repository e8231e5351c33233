"""The launcher every worker process comes from (framework workers, data-parallel ranks, the
oracle): a crash or a hang surfaces as a WorkerError of one line (what it raised and where, or
its exit code or signal with its last stderr lines, or the timeout), never as a silent hang
or a BrokenPipeError, and closing a pool leaves no process behind, not even one a worker
started in a session of its own. The workers that
misbehave on purpose are in pytest_mlbench/engine/faults.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_mlbench.engine.launcher import (
    Launch,
    Pool,
    WorkerCrashed,
    WorkerError,
    WorkerSpec,
    WorkerTimeout,
    serving_stack,
)

FAULTY = "pytest_mlbench.engine.faults:faulty"


MINE = "MLBENCH_TEST_OWNER"  # marks the workers a test starts (see no_leftovers)


def _children(owner: str) -> set[int]:
    """Live descendants of this process started while ``owner`` was in the environment: the
    test's own, not the workers of a campaign running beside it (a session that times nothing
    checks its cases meanwhile, its workers started from the environment as it was then)."""
    out = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.is_running() and child.status() != psutil.STATUS_ZOMBIE \
                    and child.environ().get(MINE) == owner:
                out.add(child.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


@pytest.fixture
def no_leftovers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Fails the test if it leaves a process running that it started."""
    owner = request.node.nodeid
    monkeypatch.setenv(MINE, owner)
    yield
    assert _children(owner) == set()


def test_a_pool_started_from_a_launch_snapshot_ignores_later_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leftovers: None) -> None:
    """A campaign beside other tests takes the process's state once: a variable set, a path
    inserted or a folder changed afterwards (as a test's monkeypatch does) never reaches its
    workers; a pool without a snapshot starts from the process as it is."""
    monkeypatch.setenv("MLBENCH_PROBE", "before")
    launch = Launch.now()
    monkeypatch.setenv("MLBENCH_PROBE", "after")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with Pool(WorkerSpec(FAULTY, 1, {}, launch=launch), start_timeout=30.0) as pool:
        seen = pool.call("environment", ("MLBENCH_PROBE", "PYTHONPATH"))[0]
    assert seen["MLBENCH_PROBE"] == "before" and seen["cwd"] == launch.cwd != str(tmp_path)
    assert str(tmp_path) not in seen["PYTHONPATH"].split(os.pathsep)
    with Pool(WorkerSpec(FAULTY, 1, {}), start_timeout=30.0) as pool:
        seen = pool.call("environment", ("MLBENCH_PROBE", "PYTHONPATH"))[0]
    assert seen["MLBENCH_PROBE"] == "after" and seen["cwd"] == str(tmp_path)
    assert str(tmp_path) in seen["PYTHONPATH"].split(os.pathsep)


def _pool(world: int = 2, timeout: float = 3.0, **config: Any) -> Pool:
    return Pool(WorkerSpec(FAULTY, world, config), start_timeout=30.0, timeout=timeout,
                stop_grace=1.0)


def test_healthy_pool_answers_in_rank_order_and_stops(no_leftovers: None) -> None:
    with _pool() as pool:
        replies = pool.call("echo", 7)
        pids = pool.pids
    assert [r["rank"] for r in replies] == [0, 1]
    assert [r["payload"] for r in replies] == [7, 7]
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
                   for pid in pids)


@pytest.mark.parametrize("at", ["setup", "go"])
def test_raising_worker_is_reported_in_one_line_with_where_it_raised(
        no_leftovers: None, at: str) -> None:
    with pytest.raises(WorkerCrashed) as info, _pool(fault_rank=1, fault_at=at) as pool:
        pool.call("go")
    text = str(info.value)
    assert f"raised ValueError: deliberate failure in rank 1 at {at}" in text
    assert "worker 1" in text and "faults.py:" in text and "\n" not in text


def test_worker_dying_without_a_word_is_reported_with_its_exit_code(no_leftovers: None) -> None:
    with pytest.raises(WorkerCrashed, match=r"worker 0 .* exited with code 3 without answering "
                                            r"'go'"), _pool(fault_rank=0, fault_at="go",
                                                            fault="exit") as pool:
        pool.call("go")


@pytest.mark.parametrize(("fault", "said"), [
    ("segv", r"worker 1 \(pid \d+\) exited with signal 11 \(SIGSEGV\) without answering 'go'; "
             r"it crashed at engine/faults\.py:\d+ _maybe_fail < engine/faults\.py:\d+ __call__"),
    ("exit0", r"worker 1 \(pid \d+\) exited with code 0 without answering 'go'"),
    ("interrupt", r"worker 1 \(pid \d+\) raised KeyboardInterrupt \(at .*faults.py:\d+"),
    ("stderr", r"exited with signal 6 \(SIGABRT\) .*; it crashed at engine/faults\.py:\d+ "
               r".*its last stderr lines: noise \| F external/xla/parse_flags.cc:1: Unknown "
               r"flag in XLA_FLAGS: --xla_garbage \(a crash"),
])
def test_a_worker_that_dies_is_one_line_naming_how_and_its_last_stderr(
        no_leftovers: None, fault: str, said: str, capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(WorkerCrashed, match=said) as info, _pool(
            fault_rank=1, fault_at="go", fault=fault) as pool:
        pool.call("go")
    assert "\n" not in str(info.value)


def test_a_command_to_a_dead_worker_is_the_death_not_a_broken_pipe(no_leftovers: None) -> None:
    """A worker killed between commands (during another phase, the matmul peaks): the next
    command names how it died, never BrokenPipeError."""
    with _pool(world=1) as pool:
        os.kill(pool.pids[0], 9)
        time.sleep(0.2)
        with pytest.raises(WorkerCrashed, match=r"exited with signal 9 \(SIGKILL\) without "
                                                r"answering 'echo'"):
            pool.call("echo", 1)
            pool.call("echo", 2)


def test_what_a_worker_started_in_its_own_session_dies_with_the_pool(no_leftovers: None) -> None:
    with _pool(world=1) as pool:
        child = pool.call("spawn")[0]
        assert psutil.Process(child).status() != psutil.STATUS_ZOMBIE
    deadline = time.monotonic() + 5
    while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"child {child} outlived its worker's pool"
        time.sleep(0.05)


def test_a_closed_pool_refuses_commands_in_one_line() -> None:
    pool = _pool(world=1)
    with pytest.raises(WorkerCrashed, match="is closed"):
        pool.call("echo")


def test_hanging_worker_times_out_and_is_killed(no_leftovers: None) -> None:
    start = time.monotonic()
    with pytest.raises(WorkerTimeout, match=r"worker\(s\) \[1\] of 2 \(pid \d+\) did not "
                                            r"answer 'go' within 1 s") as caught, \
            _pool(timeout=1.0, fault_rank=1, fault_at="go", fault="hang") as pool:
        pool.call("go")
    # where it hung, from its own stack (faulthandler on SIGUSR1, child.py): the sleep in
    # faults.py, innermost first, under the serving loop
    assert re.search(r"it was at engine/faults\.py:\d+ _maybe_fail < engine/faults\.py:\d+ "
                     r"__call__ < engine/launcher\.py:\d+ worker_main", str(caught.value))
    # the timeout, the stack (STACK_WAIT_S at most), then terminate without the stop grace
    assert time.monotonic() - start < 12.0


def test_a_stopped_hanging_worker_still_says_where_it_is(no_leftovers: None) -> None:
    """A campaign stops (SIGSTOP) the workers it is not timing; one stopped while it hangs is
    continued to write its stack."""
    with pytest.raises(WorkerTimeout, match=r"it was at engine/faults\.py"), \
            _pool(timeout=1.0, fault_rank=0, fault_at="go", fault="hang") as pool:
        pool.pause()
        pool.call("go")


def test_serving_stack_reads_the_serving_thread_of_a_faulthandler_dump() -> None:
    dump = [
        "Thread 0x00007f01 (most recent call first):",
        '  File "/usr/lib/python3.12/threading.py", line 359 in wait',
        '  File "/usr/lib/python3.12/threading.py", line 1030 in _bootstrap',
        "",
        "Current thread 0x00007f02 (most recent call first):",
        '  File "/site/jax/_src/compiler.py", line 395 in backend_compile_and_load',
        '  File "/site/jax/_src/pjit.py", line 142 in _run_python_pjit',
        '  File "/work/pytest_mlbench/engine/launcher.py", line 150 in worker_main',
        '  File "/work/pytest_mlbench/engine/child.py", line 67 in main',
    ]
    assert serving_stack(dump, 3) == ("_src/compiler.py:395 backend_compile_and_load < "
                                      "_src/pjit.py:142 _run_python_pjit < "
                                      "engine/launcher.py:150 worker_main")
    # the serving thread wins over the current one (the signal can land on any thread)
    other = ["Current thread 0x00007f03 (most recent call first):",
             '  File "/usr/lib/python3.12/selectors.py", line 468 in select']
    assert serving_stack(other + dump[4:], 1) == "_src/compiler.py:395 backend_compile_and_load"
    # no serving thread: the current one, else the first
    assert serving_stack(other + dump[:3], 1) == "python3.12/selectors.py:468 select"
    assert serving_stack(dump[:3], 1) == "python3.12/threading.py:359 wait"
    assert serving_stack(["plain stderr noise"]) == ""


def test_hang_during_start_times_out(no_leftovers: None) -> None:
    pool = Pool(WorkerSpec(FAULTY, 2, {"fault_rank": 0, "fault_at": "setup", "fault": "hang"}),
                start_timeout=2.0, stop_grace=1.0)
    with pytest.raises(WorkerTimeout, match="'start'"), pool:
        pass


def test_worker_errors_are_one_family() -> None:
    assert issubclass(WorkerCrashed, WorkerError) and issubclass(WorkerTimeout, WorkerError)


def test_paused_workers_resume_for_the_next_command(no_leftovers: None) -> None:
    """A paused pool (SIGSTOP, while another framework is timed) answers the next command."""
    with _pool() as pool:
        pool.pause()
        assert pool.paused
        assert [r["payload"] for r in pool.call("echo", 3)] == [3, 3]
        assert not pool.paused


def test_closing_a_paused_pool_leaves_nothing_behind(no_leftovers: None) -> None:
    with _pool() as pool:
        pool.pause()


def test_a_command_sent_after_a_crash_still_reports_and_close_reaps(no_leftovers: None) -> None:
    pool = _pool(fault_rank=0, fault_at="go", fault="exit")
    with pytest.raises(WorkerCrashed), pool:
        pool.call("echo", 1)
        pool.call("go")


def test_a_rank_that_fails_does_not_leave_the_parent_waiting_on_the_others(
        no_leftovers: None) -> None:
    """Rank 1 reports a failure while rank 0 hangs (as a rank left in a collective would):
    the parent gives up after the grace period, not after the call's full timeout."""
    spec = WorkerSpec(FAULTY, 2, {"fault_rank": 0, "fault_at": "go", "fault": "hang"})
    pool = Pool(spec, start_timeout=30.0, timeout=600.0, stop_grace=1.0,
                failed=lambda reply: reply.get("rank") == 1, failed_grace=1.0)
    start = time.monotonic()
    with pytest.raises(WorkerTimeout, match=r"after worker 1 reported a failure"), pool:
        pool.call("go")
    assert time.monotonic() - start < 30.0


KILLED_WITH_STOPPED_WORKERS = """
import sys
from pytest_mlbench.engine.launcher import Pool, WorkerSpec
pool = Pool(WorkerSpec("pytest_mlbench.engine.faults:faulty", 2, {}), start_timeout=30.0)
pool.start()
pool.pause()  # SIGSTOP, as the campaign does to every worker not taking its turn
print(" ".join(str(pid) for pid in pool.pids), flush=True)
sys.stdin.read()  # until the test kills this session
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_stopped_by_a_killed_session_do_not_outlive_it() -> None:
    """A session killed (SIGKILL, or SIGTERM, which pytest does not catch) while its workers
    are stopped: a stopped worker cannot see its socket close, so the kernel must end it."""
    session = subprocess.Popen([sys.executable, "-c", KILLED_WITH_STOPPED_WORKERS],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert session.stdout is not None
    pids = [int(p) for p in session.stdout.readline().split()]
    deadline = time.monotonic() + 10  # SIGSTOP is delivered asynchronously
    while not all(psutil.Process(p).status() == psutil.STATUS_STOPPED for p in pids):
        assert time.monotonic() < deadline, "the workers were never stopped"
        time.sleep(0.05)
    assert len(pids) == 2
    session.kill()
    session.wait()
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in pids if psutil.pid_exists(p)
                 and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.1)
    assert alive == [], f"workers {alive} outlived the session that started them"


def test_a_case_left_holding_a_pool_whose_worker_died_says_what_ended_it(
        no_leftovers: None) -> None:
    """The matmul peaks' worker killed: the peak is one line naming the signal (no
    BrokenPipeError), and every case still holding the pool after it is closed says what
    ended it (never ``assert None is not None``)."""
    from pytest_mlbench.engine.pools import FrameworkPool, PoolKey
    from pytest_mlbench.engine.protocol import Round

    fp = FrameworkPool(PoolKey("numpy", 1), "", 1, "off", "")
    fp.pool = _pool(world=1)
    fp.pool.start()
    os.kill(fp.pool.pids[0], 9)
    time.sleep(0.2)
    with pytest.raises(WorkerCrashed, match=r"exited with signal 9 \(SIGKILL\) without "
                                            r"answering 'matmul peak at float32'"):
        fp.peak("float32")
    fp.close()
    for _ in range(2):  # the second case that asks says it once too
        with pytest.raises(WorkerCrashed) as found:
            fp.case(1, Round(1))
        assert re.fullmatch(r"the numpy worker this case was built in is gone: worker 0 "
                            r"\(pid \d+\) exited with signal 9 .*", str(found.value)), found.value
    closed = FrameworkPool(PoolKey("numpy", 1), "", 1, "off", "")  # closed, never failed
    for _ in range(2):
        with pytest.raises(WorkerCrashed) as found:
            closed.case(1, Round(1))
        assert str(found.value) == "the numpy worker this case was built in is gone: it was closed"


def test_a_dead_oracle_worker_fails_one_call_and_is_replaced(no_leftovers: None) -> None:
    from pytest_mlbench.checking.oracle_client import OracleService

    service = OracleService()
    pool = _pool(world=1)
    pool.start()
    service.pools["jax"] = pool
    assert service.call("echo", 5, backend="jax")["payload"] == 5
    os.kill(pool.pids[0], 9)
    time.sleep(0.2)
    with pytest.raises(WorkerCrashed, match=r"the jax float64 oracle: worker 0 \(pid \d+\) "
                                            r"exited with signal 9"):
        service.call("echo", 6, backend="jax")
    assert "jax" not in service.pools  # the next call starts a fresh worker


def test_a_worker_writing_junk_to_stdout_does_not_break_the_protocol(no_leftovers: None) -> None:
    with _pool(world=1) as pool:
        assert pool.call("stdout") == ["still talking"]
        assert pool.call("echo", 2)[0]["payload"] == 2


def test_a_reply_that_would_run_code_in_the_parent_is_refused_unrun(
        tmp_path: Path, no_leftovers: None) -> None:
    """A worker's reply is read by engine/wire.py: only the protocol's values, never what a
    pickle names. A forged reply (a cheating implementation owns its worker's pipe) fails the
    call, naming what it named, and what it would have run in the parent has not run."""
    import pickle

    from pytest_mlbench.engine.faults import Forged

    ran = tmp_path / "ran"
    source = f"open({str(ran)!r}, 'w').write('the parent ran the reply')"
    with pytest.raises(WorkerCrashed) as info, _pool(world=1) as pool:
        pool.call("forged", source)
    assert "builtins.exec, which a reply may not hold" in str(info.value)
    assert not ran.exists()
    pickle.loads(pickle.dumps(Forged(source)))  # the check can fail: pickle itself runs it
    assert ran.exists()
