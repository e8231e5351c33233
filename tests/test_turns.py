"""Timed turns: the first round after a worker resumes is run and dropped, and the campaign
plans rounds, turns and audits so that dropped rounds never shorten what is recorded.
A fake pool stands in for the worker: nothing here depends on how fast anything runs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pytest_mlbench import pipeline


class FakePool:
    """Answers "round" with a cold first round (10x) and warm ones after it."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, dict[int, Any]]] = []

    def case(self, handle: int, method: str, first: int, total: int, calls: int,
             keep: dict[int, Any], timeout: float) -> list[dict[str, Any]]:
        assert method == "round"
        self.calls.append((first, total, dict(keep)))
        seconds = [10.0] + [1.0] * (total - 1)
        return [{"seconds": seconds, "kept": {r: {"params": {}} for r in keep}}]


def case_run(pool: FakePool) -> pipeline.CaseRun:
    cid = SimpleNamespace(task=SimpleNamespace(kind="train"))
    ctx = SimpleNamespace(cid=cid, where="fake", reference=SimpleNamespace(seed=0))
    run = pipeline.CaseRun(ctx, pool, {"name": "fake"}, calls=1)  # type: ignore[arg-type]
    run.handle, run.round_s = 1, 1.0
    return run


def test_each_turn_drops_its_first_round_and_records_the_rest() -> None:
    pool = FakePool()
    run = case_run(pool)
    assert run.turn(3) == [1.0, 1.0, 1.0]
    assert run.turn(2) == [1.0, 1.0]
    assert run.seconds == [1.0] * 5 and 10.0 not in run.seconds
    # rounds are numbered through the dropped ones: 1-4, then 5-7
    assert [(first, total) for first, total, _ in pool.calls] == [(1, 4), (5, 3)]
    assert run.rounds_done == 7


def test_a_dropped_round_can_be_audited_like_any_other() -> None:
    pool = FakePool()
    run = case_run(pool)
    run.audits = {5}  # the first, dropped round of the second turn
    run.turn(3)
    run.turn(2)
    second_keep = pool.calls[1][2]
    assert 5 in second_keep and 4 in pool.calls[0][2]  # its state before, and after
    assert 5 in run.kept


def test_without_dropping_every_round_is_recorded() -> None:
    run = case_run(FakePool())
    assert run.turn(2, discard=0) == [10.0, 1.0]
