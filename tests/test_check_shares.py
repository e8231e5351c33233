"""A session that times nothing checks its cases in two campaigns at once (session.py): whole
comparison groups are dealt out, an A/B session is never split, and an error or Ctrl-C in one
campaign cancels the other and reaches the session."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from pytest_mlbench.campaign import Lane, Outcome, check_shares
from pytest_mlbench.engine.workers import Side
from pytest_mlbench.session import run_campaigns


@dataclass(frozen=True)
class FakeCase:
    name: str
    group: str


def lane(groups: dict[str, int], side: str = "") -> Lane:
    cases = tuple(FakeCase(f"{g}-{i}", g) for g, n in groups.items() for i in range(n))
    return Lane(Side(side), None, cases)  # type: ignore[arg-type]


def test_whole_groups_are_dealt_largest_first() -> None:
    shares = check_shares([lane({"a": 7, "b": 2, "c": 5, "d": 3})], 2)
    assert len(shares) == 2
    groups = [{c.group for c in share[0].cases} for share in shares]
    assert groups[0].isdisjoint(groups[1])
    sizes = sorted(len(share[0].cases) for share in shares)
    assert sizes == [8, 9]  # 7+2 against 5+3
    every = [c.name for share in shares for c in share[0].cases]
    assert sorted(every) == sorted(c.name for c in lane({"a": 7, "b": 2, "c": 5, "d": 3}).cases)


def test_nothing_to_split_stays_one_campaign() -> None:
    one_group = [lane({"a": 4})]
    assert check_shares(one_group, 2) == [one_group]
    assert check_shares([lane({"a": 1, "b": 1})], 1) == [[lane({"a": 1, "b": 1})]]
    ab = [lane({"a": 2, "b": 2}), lane({"a": 2, "b": 2}, side="base")]
    assert check_shares(ab, 2) == [ab]


class FakeCampaign:
    def __init__(self, outcomes: dict[str, Outcome], fail: BaseException | None = None,
                 wait: bool = False) -> None:
        self.outcomes, self.fail, self.wait = outcomes, fail, wait
        self.cancelled = threading.Event()

    def run(self) -> dict[str, Outcome]:
        if self.fail is not None:
            raise self.fail
        if self.wait:  # a long campaign: ends only when cancelled
            assert self.cancelled.wait(10), "never cancelled"
            raise KeyboardInterrupt("the campaign was cancelled")
        return self.outcomes

    def cancel(self) -> None:
        self.cancelled.set()


def test_outcomes_of_every_campaign_are_merged() -> None:
    a = FakeCampaign({"x": Outcome("passed")})
    b = FakeCampaign({"y": Outcome("failed", "wrong gradient")})
    merged = run_campaigns([a, b])  # type: ignore[list-item]
    assert {k: v.status for k, v in merged.items()} == {"x": "passed", "y": "failed"}


@pytest.mark.parametrize("cause", [KeyboardInterrupt(), RuntimeError("the oracle died")])
def test_a_failing_campaign_cancels_the_other_and_its_error_reaches_the_session(
        cause: BaseException) -> None:
    waiting = FakeCampaign({}, wait=True)
    failing = FakeCampaign({}, fail=cause)
    start = time.monotonic()
    with pytest.raises(type(cause)) as raised:
        run_campaigns([failing, waiting])  # type: ignore[list-item]
    assert raised.value is cause
    assert waiting.cancelled.is_set() and time.monotonic() - start < 5
    with pytest.raises(type(cause)):
        run_campaigns([waiting.__class__({}, wait=True), failing])  # type: ignore[list-item]


