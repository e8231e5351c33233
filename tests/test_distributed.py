"""The data-parallel machinery: worker crash and hang detection with the worker's own error,
no process left behind, the --mlbench-workers option, and the correctness gate catching a
wrong gradient reduction in both engines."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_mlbench import catalogue
from pytest_mlbench.distributed import runner
from pytest_mlbench.distributed.launcher import (
    Pool,
    WorkerCrashed,
    WorkerError,
    WorkerSpec,
    WorkerTimeout,
)
from pytest_mlbench.options import OptionError, build_settings, option_table, parse_workers

ROOT = Path(__file__).resolve().parents[1]
FAULTY = "pytest_mlbench.distributed.faults:faulty"


def _children() -> set[int]:
    """Live descendants of this process, minus multiprocessing's shared resource tracker
    (started once by the first spawn, by design long-lived, owned by no test)."""
    out = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.is_running() and child.status() != psutil.STATUS_ZOMBIE \
                    and "resource_tracker" not in " ".join(child.cmdline()):
                out.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return out


@pytest.fixture
def no_leftovers() -> Any:
    """Fails the test if it leaves a process running that was not there before."""
    before = _children()
    yield
    assert multiprocessing.active_children() == []
    assert _children() - before == set()


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
def test_raising_worker_is_reported_with_its_traceback(no_leftovers: None, at: str) -> None:
    with pytest.raises(WorkerCrashed) as info, _pool(fault_rank=1, fault_at=at) as pool:
        pool.call("go")
    text = str(info.value)
    assert f"ValueError: deliberate failure in rank 1 at {at}" in text
    assert "Traceback (most recent call last)" in text and "worker 1" in text


def test_worker_dying_without_a_word_is_reported_with_its_exit_code(no_leftovers: None) -> None:
    with pytest.raises(WorkerCrashed, match=r"worker 0 .* exited with code 3 without answering "
                                            r"'go'"), _pool(fault_rank=0, fault_at="go",
                                                            fault="exit") as pool:
        pool.call("go")


def test_hanging_worker_times_out_and_is_killed(no_leftovers: None) -> None:
    start = time.monotonic()
    with pytest.raises(WorkerTimeout, match=r"worker\(s\) \[1\] of 2 did not answer 'go' within "
                                            r"1 s"), _pool(timeout=1.0, fault_rank=1,
                                                           fault_at="go", fault="hang") as pool:
        pool.call("go")
    # the timeout, then terminate without the stop grace (the pool knows it failed)
    assert time.monotonic() - start < 10.0


def test_hang_during_start_times_out(no_leftovers: None) -> None:
    pool = Pool(WorkerSpec(FAULTY, 2, {"fault_rank": 0, "fault_at": "setup", "fault": "hang"}),
                start_timeout=2.0, stop_grace=1.0)
    with pytest.raises(WorkerTimeout, match="'start'"), pool:
        pass


def test_worker_errors_are_one_family() -> None:
    assert issubclass(WorkerCrashed, WorkerError) and issubclass(WorkerTimeout, WorkerError)


# -- --mlbench-workers ---------------------------------------------------------------------------

def test_workers_option_parses_a_comma_list() -> None:
    assert parse_workers("1,2,4") == (1, 2, 4)
    assert parse_workers(" 4, 2 ,4") == (4, 2)
    assert build_settings({}, option_table()).workers == (1, 2)


@pytest.mark.parametrize("bad", ["", "0", "two", "1,,2", "-1", "2.5", "5000"])
def test_bad_workers_value_names_option_and_fix(bad: str) -> None:
    with pytest.raises(OptionError, match=r"^--mlbench-workers: .* is not a worker count; give "
                                          r"a comma list of integers from 1 to \d+, such as "
                                          r"1,2,4$"):
        build_settings({"workers": bad}, option_table())


def test_bad_workers_is_a_one_line_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest("--mlbench-workers=1,x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --mlbench-workers: 'x' is not a worker count;*"])


# -- the correctness gate against a wrong reduction ----------------------------------------------

def _mlp_case(framework: str, workers: int) -> runner.DPCase:
    mlp = catalogue.load_workload(ROOT / "suites" / "mlp")
    return runner.DPCase(mlp, mlp.sizes["smoke"][0], framework, workers, "cpu", "fp32")


@pytest.mark.parametrize("framework", ["jax", "torch"])
def test_summed_gradients_fail_the_single_device_check(framework: str,
                                                       no_leftovers: None) -> None:
    """Summing the shards' gradients instead of averaging doubles the step on 2 workers;
    the gate must say so before anything is timed."""
    pytest.importorskip(framework)
    case = _mlp_case(framework, 2)
    inputs, params = runner.prepare(case, seed=0)
    spec = runner.worker_spec(case, ROOT / "suites" / "dp", inputs, params, 0, reduction="sum")
    with pytest.raises(AssertionError, match=r"vs single-device after 1 step\(s\), displacement "
                                             r"of w\d: \d+ of \d+ elements differ"), \
            runner.start_pool(case, spec, start_timeout=120.0, timeout=60.0) as pool:
        runner.check_dp(pool, case, inputs, params)
