"""What a timed turn used and what the worker holds (engine/usage.py, issue 56), read in this
process: CPU time is counted in CPU seconds, so a loaded host's preemption stretches the wall
time of these tests but not what they read."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy  # noqa: F401  (its BLAS loaded: threadpoolctl finds only what is loaded)
import pytest

from pytest_mlbench import threads as threading_
from pytest_mlbench.engine import usage

BURN_S = 0.15
BURN = f"import time\nend = time.process_time() + {BURN_S}\nwhile time.process_time() < end: pass"
LINUX = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads /proc (Linux)")


def burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


@pytest.fixture
def confined() -> Iterator[tuple[int, int]]:
    """Every thread of this process on its first core for the test, and a second core (at
    least two needed: a thread let past the first is what is looked for); the mask restored
    after."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cores) < 2:
        pytest.skip("needs two cores to let a thread past the first")
    threading_.place([cores[0]])
    try:
        yield cores[0], cores[1]
    finally:
        threading_.place(cores)


def setting(core: int) -> usage.Setting:
    return usage.Setting("numpy", 1, frozenset({core}), None, {})


def test_children_that_ended_are_read_from_the_kernel_s_account() -> None:
    before = usage.reaped()
    subprocess.run([sys.executable, "-c", BURN], check=True)
    assert usage.reaped() - before >= BURN_S * 0.9


@LINUX
def test_a_child_process_alive_through_a_turn_is_counted_named_and_held_new(
        confined: tuple[int, int]) -> None:
    """A turn reads its children as it begins and ends (never per round): one started in
    the turn and still alive at its end is counted to the nanosecond, named as a child that
    ran and as one held that was not when timing began; its mask, left wide, is found."""
    turn = usage.Turn()
    turn.begin()
    child = subprocess.Popen([sys.executable, "-c", BURN + "\ntime.sleep(30)"])
    try:
        os.sched_setaffinity(child.pid, set(confined))
        deadline = time.monotonic() + 30
        while usage.process_cpu(child.pid) < BURN_S and time.monotonic() < deadline:
            time.sleep(0.02)
        found = turn.end(setting(confined[0]))
    finally:
        child.kill()
        child.wait()
    assert found.children_cpu >= BURN_S * 0.9, found
    assert child.pid in found.children and child.pid in found.new_processes
    assert any(w.startswith(f"child process {child.pid} ") for w in found.widened), found
    assert found.span > 0


@LINUX
def test_a_thread_let_past_the_case_s_cores_is_found_and_named_new(
        confined: tuple[int, int]) -> None:
    turn = usage.Turn()
    turn.begin()
    ready, done = threading.Event(), threading.Event()

    def widen() -> None:
        os.sched_setaffinity(0, set(confined))
        ready.set()
        done.wait(30)

    thread = threading.Thread(target=widen)
    thread.start()
    try:
        ready.wait(30)
        found = turn.end(setting(confined[0]))
    finally:
        done.set()
        thread.join()
    mine = [w for w in found.widened if w.startswith(f"thread {thread.native_id} ")]
    assert mine, found
    # only this thread's entry is asserted: the test session's own threads (its background
    # sessions' lanes, a campaign's) are outside any case's cores too
    assert found.widened[mine[0]] == sorted(confined)
    assert thread.native_id in found.new_threads
    # no child process is asserted absent: in the test line this process has children of its
    # own (its background sessions' pytest processes, the campaign's workers)


@LINUX
def test_calls_that_change_a_control_are_recorded_only_while_timed(
        confined: tuple[int, int]) -> None:
    """The watch wraps the setters (here os.sched_setaffinity and threadpoolctl's, which
    threadpool_limits goes through): a call to another count, or past the case's cores,
    while a round runs is recorded with how often; one to the session's count is not."""
    from threadpoolctl import threadpool_limits

    first, wide = confined[0], set(confined)
    usage.install_watch(1, {first})
    usage.WATCH.taken()
    os.sched_setaffinity(0, wide)  # not timed: not recorded
    with usage.WATCH.timed():
        for _ in range(3):
            os.sched_setaffinity(0, wide)
        os.sched_setaffinity(0, {first})
        with threadpool_limits(limits=2):
            pass
        with threadpool_limits(limits=1):
            pass
    found = usage.WATCH.taken()
    assert found.pop(f"os.sched_setaffinity(<thread>, {sorted(wide)})") == 3
    assert found and all("set_num_threads(2)" in what for what in found), found
    assert usage.WATCH.taken() == {}


def test_the_cheap_controls_are_every_blas_pool_s_count() -> None:
    blas = usage.blas_controller()
    found = usage.controls("numpy", blas)
    assert found and all(isinstance(v, int) for v in found.values()), found
    assert set(found) == {f"{lib.internal_api}:{os.path.basename(lib.filepath)}"
                          for lib in blas.lib_controllers}


@LINUX
def test_the_process_cpu_clock_of_this_process_counts_every_thread() -> None:
    """A thread's CPU counts in the process's clock, as the round's reading counts it."""
    before = usage.process_cpu(os.getpid())
    thread = threading.Thread(target=burn, args=(BURN_S,))
    thread.start()
    thread.join()
    assert usage.process_cpu(os.getpid()) - before >= BURN_S * 0.9
