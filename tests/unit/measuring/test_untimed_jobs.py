"""Untimed jobs run side by side (measuring/untimed_jobs.py): never two on one key, in order within a key,
no more at once than the width; a failing job stops the batch and reaches the caller; Ctrl-C
ends the workers (``interrupt``) so that blocked jobs return, then reaches the caller."""

from __future__ import annotations

import threading
import time

import pytest

from pytest_mlbench.measuring.untimed_jobs import Job, UntimedJobs


class Tracker:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict[str, int] = {}
        self.most = 0
        self.same_key_overlap = False
        self.order: list[tuple[str, int]] = []

    def job(self, key: str, i: int, seconds: float = 0.02) -> Job:
        def run(_: object) -> None:
            with self.lock:
                self.same_key_overlap |= self.running.get(key, 0) > 0
                self.running[key] = self.running.get(key, 0) + 1
                self.most = max(self.most, sum(self.running.values()))
                self.order.append((key, i))
            time.sleep(seconds)
            with self.lock:
                self.running[key] -= 1

        return Job((key,), run)


def test_jobs_run_side_by_side_but_never_two_on_one_key() -> None:
    t = Tracker()
    jobs = [t.job(k, i) for i in range(4) for k in ("torch", "jax", "tf")]
    UntimedJobs(2).run(jobs)
    assert len(t.order) == 12
    assert t.most == 2  # side by side, never more than the width
    assert not t.same_key_overlap
    for key in ("torch", "jax", "tf"):  # in the order given, within a key
        assert [i for k, i in t.order if k == key] == [0, 1, 2, 3]


def test_one_key_runs_one_at_a_time_whatever_the_width() -> None:
    t = Tracker()
    UntimedJobs(4).run([t.job("torch", i) for i in range(5)])
    assert t.most == 1 and [i for _, i in t.order] == list(range(5))


def test_width_one_runs_in_the_callers_thread() -> None:
    seen: list[str] = []
    UntimedJobs(1).run([Job(("a",), lambda _: seen.append(threading.current_thread().name))] * 2)
    assert seen == [threading.current_thread().name] * 2


def test_a_failing_job_stops_the_batch_and_reaches_the_caller() -> None:
    t = Tracker()

    def fail(_: object) -> None:
        raise RuntimeError("broken job")

    jobs = [Job(("a",), fail)] + [t.job("b", i, 0.05) for i in range(20)]
    with pytest.raises(RuntimeError, match="broken job"):
        UntimedJobs(2).run(jobs)
    assert len(t.order) < 20  # no new job started once one had failed


def test_ctrl_c_interrupts_blocked_jobs_and_reaches_the_caller() -> None:
    released = threading.Event()
    interrupted: list[bool] = []

    def blocked(_: object) -> None:  # a job waiting on a worker, until the worker is killed
        assert released.wait(10), "never released"

    def interrupt() -> None:
        interrupted.append(True)
        released.set()

    def ctrl_c() -> None:  # Ctrl-C lands in the session's thread, while it waits
        time.sleep(0.1)
        threading.main_thread()
        raise KeyboardInterrupt

    jobs = UntimedJobs(2, interrupt=interrupt)
    original = jobs._start

    def start_then_interrupt(*args: object) -> None:
        original(*args)  # type: ignore[arg-type]
        if not interrupted:
            ctrl_c()

    jobs._start = start_then_interrupt  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        jobs.run([Job(("a",), blocked), Job(("b",), blocked)])
    assert interrupted == [True] and released.is_set()


def test_a_job_runs_on_whichever_of_its_keys_is_free() -> None:
    """Equivalent pools (a pool of each framework per core): two jobs naming the same two keys
    run side by side, each on its own key, and no key ever takes two at once."""
    lock = threading.Lock()
    on: dict[object, int] = {}
    used: list[object] = []
    overlap = [False]
    most = [0]

    def run(key: object) -> None:
        with lock:
            overlap[0] |= on.get(key, 0) > 0
            on[key] = on.get(key, 0) + 1
            most[0] = max(most[0], sum(on.values()))
            used.append(key)
        time.sleep(0.05)
        with lock:
            on[key] -= 1

    UntimedJobs(2).run([Job(("torch/0", "torch/1"), run) for _ in range(6)])
    assert most[0] == 2 and not overlap[0]
    assert set(used) == {"torch/0", "torch/1"}


def test_a_job_takes_a_spare_key_only_when_no_other_job_can_use_the_free_thread() -> None:
    """A job's later keys are spare pools that start when first used: while another job can
    run on its own first key, the free thread goes to it. Here the second "a" job waits for
    a0 rather than opening a1, because the "b" job can use the other thread (it then waits for
    the second "a" job, so the order is fixed without timing anything)."""
    second_done = threading.Event()
    used: list[object] = []

    def a(key: object) -> None:
        used.append(key)
        if len(used) == 2:
            second_done.set()

    def b(key: object) -> None:
        assert second_done.wait(10), "the second 'a' job never ran beside 'b'"

    UntimedJobs(2).run([Job(("a0", "a1"), a), Job(("a0", "a1"), a), Job(("b0", "b1"), b)])
    assert used == ["a0", "a0"]
