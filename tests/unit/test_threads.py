"""Thread control: the threads that do the work are found by what they use, not by name, and
pinned to distinct cores (--mlbench-affinity=pin)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from pytest_mlbench import threads

linux_affinity = pytest.mark.skipif(not hasattr(os, "sched_setaffinity")
                                    or not os.path.isdir("/proc/self/task"),
                                    reason="per-thread affinity and /proc are Linux's")


def test_environment_sizes_every_pool_and_keeps_inter_op_at_one() -> None:
    env = threads.environment(3)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "NUMBA_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
        assert env[var] == "3"
    assert env["TF_NUM_INTEROP_THREADS"] == "1"


def test_busy_threads_by_share_of_wall_time() -> None:
    before = {1: 0.0, 2: 0.0, 3: 0.0}
    after = {1: 0.95, 2: 0.05, 3: 0.40, 4: 0.30}  # 4 started in between
    busy = threads.busy_threads(before, after, wall=1.0)
    assert list(busy) == [1, 3, 4] and 2 not in busy


class Spinner(threading.Thread):
    """Spins until stopped (at most ``seconds``): a loaded machine must not end it before the
    test has looked at it."""

    def __init__(self, seconds: float) -> None:
        super().__init__(daemon=True)
        self.seconds, self.tid = seconds, 0
        self.stop = threading.Event()

    def run(self) -> None:
        self.tid = threading.get_native_id()
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end and not self.stop.is_set():
            pass


@linux_affinity
def test_a_spinning_thread_is_found_and_pinned_off_the_idle_callers_core() -> None:
    spinner = Spinner(30.0)
    before, start = threads.cpu_seconds(), time.perf_counter()
    spinner.start()
    while not spinner.tid:
        time.sleep(0.01)
    # the caller waits, as XLA's and TensorFlow's callers do, until the spinner has used a
    # good share of a core (on a loaded machine that takes longer than its share of wall time);
    # it looks rarely: reading every thread's counters costs CPU in a process with many
    # threads (frameworks loaded by other tests), and at 20 looks a second, and again at 4
    # (5.3% in a fresh-clone CI run), the caller itself crossed the 5% share on a loaded host
    while threads.cpu_seconds().get(spinner.tid, 0.0) < 0.2 and spinner.is_alive():
        time.sleep(1.0)
    busy = threads.busy_threads(before, threads.cpu_seconds(), time.perf_counter() - start,
                                share=0.05)
    assert spinner.tid in busy and threading.get_native_id() not in busy
    cores = threads.cores()
    try:
        done = threads.pin(busy)
        assert done["pinned"] and done["pool_threads"] >= 1
        # the caller only waited: the pool starts on the first core
        assert os.sched_getaffinity(spinner.tid) == {cores[0]}
        assert os.sched_getaffinity(threading.get_native_id()) == {cores[0]}
    finally:
        threads.unpin()
        spinner.stop.set()
        spinner.join()
    assert os.sched_getaffinity(threading.get_native_id()) == set(cores)


@linux_affinity
def test_a_computing_caller_keeps_its_core_and_the_pool_takes_the_next() -> None:
    cores = threads.cores()
    if len(cores) < 2:
        pytest.skip("needs two cores")
    spinner = Spinner(10.0)
    spinner.start()
    while not spinner.tid:
        time.sleep(0.01)
    main = threading.get_native_id()
    try:
        threads.pin({main: 0.9, spinner.tid: 0.9})
        assert os.sched_getaffinity(main) == {cores[0]}
        assert os.sched_getaffinity(spinner.tid) == {cores[1]}
    finally:
        threads.unpin()
        spinner.stop.set()
        spinner.join()


def test_nothing_busy_pins_nothing() -> None:
    assert threads.pin({})["pinned"] is False


@pytest.mark.parametrize(("framework", "workers", "world", "threads", "expected"), [
    ("numpy", 1, 1, 2, 2),   # one device: --mlbench-threads
    ("torch", 2, 2, 2, 1),   # two ranks share the threads
    ("torch", 2, 2, 1, 1),   # at least one each
    ("jax", 2, 1, 1, 2),     # one process owning two devices: a thread per device
    ("jax", 2, 1, 4, 4),
])
def test_threads_per_worker_follow_the_pool_layout(framework: str, workers: int, world: int,
                                                   threads: int, expected: int) -> None:
    from pytest_mlbench.engine.pools import FrameworkPool, PoolKey
    pool = FrameworkPool(PoolKey(framework, workers), "x", threads, "off", "")
    assert pool.per_worker_threads(world) == expected


def test_a_worker_with_fewer_threads_than_its_pool_expects_fails() -> None:
    """The rule above is what prepare checks: XLA's pool of 1 where two devices need 2."""
    from pytest_mlbench.checking.asserts import assert_threads
    with pytest.raises(AssertionError, match="xla_cpu_pool=1"):
        assert_threads({"xla_cpu_pool": 1}, 2, where="jax jit (mlp-jax-jit-w2)")
