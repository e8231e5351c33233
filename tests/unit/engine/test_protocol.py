"""The parent and a framework worker speak engine/protocol.py: every command has its handler in
the worker's dispatch table, a case's failure comes back as typed data and is raised as one
line in the parent, and a real worker answers every case command with its reply's type."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_mlbench import frameworks
from pytest_mlbench.engine import protocol as p
from pytest_mlbench.engine.framework_worker import CASE_COMMANDS, COMMANDS, FrameworkWorker
from pytest_mlbench.engine.pools import (
    CaseError,
    CaseFailed,
    CaseSkipped,
    FrameworkPool,
    PoolKey,
)
from pytest_mlbench.errors import Unsupported
from pytest_mlbench.workloads import catalogue
from pytest_mlbench.workloads.case import CaseId

SUITES = Path(__file__).resolve().parents[3] / "suites"


def _commands(base: type) -> set[type]:
    return {c for c in vars(p).values()
            if isinstance(c, type) and issubclass(c, base) and c is not base
            and c is not p.CaseCommand and dataclasses.is_dataclass(c)}


def test_every_command_has_one_handler_and_a_name_of_its_own() -> None:
    commands, case_commands = _commands(p.Command), _commands(p.CaseCommand)
    assert commands == set(COMMANDS), f"without a handler: {commands - set(COMMANDS)}"
    assert case_commands == set(CASE_COMMANDS), \
        f"without a handler: {case_commands - set(CASE_COMMANDS)}"
    names = [c.name for c in commands | case_commands]
    assert len(names) == len(set(names)), names
    for command in commands | case_commands:
        assert command.__dataclass_params__.frozen, command  # type: ignore[attr-defined]


def test_an_unknown_command_is_one_line_naming_what_the_worker_serves() -> None:
    worker = object.__new__(FrameworkWorker)  # the dispatch needs no framework
    with pytest.raises(ValueError, match=r"unknown command 'bogus' \(str\): this worker "
                                         r"serves \['case', 'close', 'info', 'open', "):
        worker("bogus", "bogus")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown case command Info: a case serves \["):
        worker.on_case(p.OnCase(0, p.Info()))  # type: ignore[arg-type]


@pytest.mark.parametrize(("raised", "expected"), [
    (Unsupported("no bfloat16 here"), p.Skipped("no bfloat16 here")),
    (AssertionError("dtypes differ"), p.Failed("dtypes differ")),
])
def test_a_case_s_skip_or_failure_comes_back_as_data(raised: Exception,
                                                     expected: p.Outcome) -> None:
    def fn() -> None:
        raise raised

    assert FrameworkWorker._guarded(fn) == expected
    assert FrameworkWorker._guarded(lambda: p.Seconds(1.0)) == p.Ok(p.Seconds(1.0))
    found = FrameworkWorker._guarded(lambda: 1 / 0)
    assert isinstance(found, p.Raised) and found.error == "ZeroDivisionError: division by zero"
    assert "Traceback" in found.traceback


@pytest.mark.parametrize(("reply", "error", "message"), [
    (p.Skipped("no GPU"), CaseSkipped, "^no GPU$"),
    (p.Failed("params differ"), CaseFailed, r"^params differ \(rank 1\)$"),
    (p.Raised("KeyError: 'w'", ""), CaseError, r"^KeyError: 'w' \(rank 1\)$"),
])
def test_the_parent_raises_a_rank_s_failure_as_one_line(reply: p.Outcome, error: type,
                                                        message: str) -> None:
    pool = FrameworkPool(PoolKey("numpy", 2), "", 1, "off", "")
    with pytest.raises(error, match=message):
        pool._values([p.Ok(p.Seconds(1.0)), reply])
    assert pool._values([p.Ok(p.Seconds(1.0))]) == [p.Seconds(1.0)]


def _open_mlp(pool: FrameworkPool) -> tuple[int, CaseId]:
    workload = catalogue.load_workload(SUITES / "mlp")
    shape, task = workload.sizes["smoke"][0], workload.all_tasks[0]
    cid = CaseId(workload, shape, task, "numpy", "eager", "cpu", "fp32")
    return pool.open(p.CaseSpec.of(cid, str(SUITES), "smoke", 0)), cid


def test_a_worker_answers_every_case_command_with_its_reply_type() -> None:
    """Through the pipe: each reply is the type its command names (CaseCommand[R])."""
    pool = FrameworkPool(PoolKey("numpy", 1), frameworks.BUILTIN["numpy"], 1, "off", "",
                         compiler="")
    pool.start()
    try:
        assert [type(i) for i in pool.info] == [p.WorkerInfo]
        assert set(pool.info[0].as_record()) == {"threads", "versions", "pinned",
                                                 "compiler_start_s"}
        handle, cid = _open_mlp(pool)
        expected: list[tuple[p.CaseCommand[Any], type]] = [
            (p.Start(), p.Started), (p.Evaluate(0), p.Gradient), (p.Steps(2), p.Stepped),
            (p.Learn(p.Round(2), pin=False), p.RoundRan), (p.Round(2), p.RoundRan),
            (p.Fetch([(0, None), (1, None)]), p.Fetched), (p.Pretouch(), p.Heap),
            (p.CompiledSeconds(), p.Seconds), (p.MeasurePeakMemory(), p.PeakMemory),
            (p.Finish(True), p.Finished)]
        for command, reply in expected:
            found = pool.case(handle, command)
            assert [type(f) for f in found] == [reply], command
        ran = pool.case(handle, p.Round(2))[0]
        assert ran.serial > 0 and ran.faults >= 0 and ran.steps is not None
        assert ran.usage is None and ran.cpu is not None and ran.cpu_wall is not None
        ended = pool.case(handle, p.Round(2, follows=True, ends=True))[0]
        assert isinstance(ended.usage, p.TurnUsage)  # the turn's, with the round ending it
        done = pool.case(handle, p.Finish(True))[0]
        assert isinstance(done.trained, p.Gradient) and done.snapshot is not None
        with pytest.raises(CaseFailed, match="no longer kept in the worker"):
            pool.case(handle, p.Fetch([(99, None)]))
        with pytest.raises(CaseError, match="KeyError"):  # a handle the worker never opened
            pool.case(handle + 7, p.Start())
        pool.close_case(handle)
        assert pool.peak("float32") is not None
    finally:
        pool.close(kill=True)


@pytest.mark.parametrize("world", [1, 2])
def test_every_rank_of_a_pool_repeats_its_learning_round_alike(
        world: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Learn repeats a warm-up round while the worker watches its threads: by the clock in a
    one-rank pool, but the same count on every rank of a data-parallel one, whose rounds meet
    in collectives (a rank that stopped by its own clock one round early left another
    waiting in a collective until the timeout: seen as a 600 s hang with --mlbench-affinity=pin)."""
    from pytest_mlbench.engine import framework_worker as fw

    monkeypatch.setattr(fw.threading_, "unpin", lambda: {"pinned": False})
    worker = object.__new__(FrameworkWorker)
    worker.world = world
    ran: list[int] = []
    clock = iter(range(1000))
    # the worker module's own name for time, not the time module every thread shares (the
    # suites' campaign runs beside this test in the test line and reads its clocks meanwhile)
    monkeypatch.setattr(fw, "time", SimpleNamespace(perf_counter=lambda: next(clock) * 0.01))
    worker.learn_and_pin(lambda: ran.append(1), pin=False)
    assert len(ran) == (fw.LEARN_RANK_ROUNDS if world > 1 else 10)
    assert worker.pinned == {"pinned": False}


@pytest.mark.parametrize("world", [1, 2])
def test_a_training_learn_rehearses_after_its_round_as_often_on_every_rank(
        world: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A training case's Learn runs its round once, then repeats the case's rehearsal (a loss
    and gradient, no step: CaseServer.rehearsal), by the same rule as a round's repeats."""
    from pytest_mlbench.engine import framework_worker as fw

    monkeypatch.setattr(fw.threading_, "unpin", lambda: {"pinned": False})
    worker = object.__new__(FrameworkWorker)
    worker.world = world
    ran: list[int] = []
    rehearsed: list[int] = []
    clock = iter(range(1000))
    monkeypatch.setattr(fw, "time", SimpleNamespace(perf_counter=lambda: next(clock) * 0.01))
    worker.learn_and_pin(lambda: ran.append(1), pin=False, again=lambda: rehearsed.append(1))
    assert len(ran) == 1
    assert len(rehearsed) == (fw.LEARN_RANK_ROUNDS - 1 if world > 1 else 9)


def test_a_round_s_keys_and_follows_reach_the_case_server() -> None:
    """Round's fields are CaseServer.round's arguments, ``follows`` included (a turn is one
    Round a round, each with its own keys: train-ahead's per-round keys)."""
    from pytest_mlbench.engine import framework_worker as fw

    got: list[tuple[Any, ...]] = []

    class Case:
        def round(self, *args: Any) -> str:
            got.append(args)
            return "ran"

    assert fw.run_round(Case(), p.Round(2, [5, 6], follows=True)) == "ran"  # type: ignore[arg-type]
    assert fw.run_round(Case(), p.Round(2, [7, 8])) == "ran"  # type: ignore[arg-type]
    assert got == [(2, [5, 6], True), (2, [7, 8], False)]
