"""The A/B gate's judgement on made-up pairs (judging/ab.py): each case's paired test takes the
session's prior on the spread of its cases' paired log ratios (issue 52), so three processes
a side are judged with the degrees of freedom of the whole session. Nothing here is timed."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np

from pytest_mlbench.judging import ab
from pytest_mlbench.measuring.outcome import Outcome
from pytest_mlbench.storing.record import Measure, Record
from tests.synthetic import identity


def side(c: int, logs: np.ndarray) -> Outcome:
    """Case ``c``'s side: one round a process at exp(log)."""
    measure = Measure(1, tuple((float(math.exp(x)),) for x in logs))
    return Outcome("passed", record=Record(identity(dims={"case": c}), f"c{c}", measure))


def session(slowed: list[float], others: int = 11, seed: int = 41) -> dict[str, Any]:
    """Eleven unchanged cases whose three pairs agree to 3% (sd), and one whose pairs read
    ``slowed`` (head / base)."""
    rng = np.random.default_rng(seed)
    pairs = {f"c{c}": (side(c, np.zeros(3)), side(c, 0.03 * rng.standard_normal(3)))
             for c in range(others)}
    pairs["slowed"] = (side(99, np.zeros(3)), side(99, np.log(slowed)))
    return pairs


def judged(pairs: dict[str, Any]) -> dict[str, str]:
    gate = ab.ABSession(config=None, label="base",  # type: ignore[arg-type]
                        gate=SimpleNamespace(threshold=0.10, alpha=0.01))  # type: ignore[arg-type]
    gate.judge(pairs)
    assert gate.judgement is not None
    return {r.name: r.verdict for r in gate.judgement.rows}


def test_three_scattered_pairs_are_judged_with_the_sessions_spread() -> None:
    """+15% in three pairs that scatter (1.05, 1.15, 1.25): on their own two degrees of
    freedom a paired t cannot call it at 1% (p 0.05); the session's other cases say pairs
    scatter by 3%, and the moderated test calls it SLOWER. No unchanged case is."""
    pairs = session([1.05, 1.15, 1.25])
    verdicts = judged(pairs)
    assert verdicts["slowed"] == "SLOWER"
    assert all(v == "no significant change" for name, v in verdicts.items() if name != "slowed")
    base, head = pairs["slowed"]
    alone = ab.compare("slowed", base, head, threshold=0.10, alpha=0.01)
    assert alone.verdict == "no significant change" and alone.ratio is not None
    assert 0.01 < alone.ratio.p_slower < 0.1


def test_a_case_whose_pairs_agreed_by_chance_does_not_pass_for_certain() -> None:
    """+3% in three pairs that agree to 0.5% (three pairs scattering 3% do so one time in
    forty): alone, a paired t calls it significant (p 0.004); the session says pairs scatter
    by 3%, so it is not (p 0.03). (Pairs that agree to 0.1% would pull the session's prior
    itself down: its moments are limma's, not robust to such a case.)"""
    pairs = session([1.025, 1.030, 1.035])
    assert judged(pairs)["slowed"] == "no significant change"
    base, head = pairs["slowed"]
    alone = ab.compare("slowed", base, head, threshold=0.10, alpha=0.01)
    assert alone.verdict == "slower, within threshold"


def test_a_session_of_few_cases_has_no_prior() -> None:
    """Below stats.PRIOR_MIN judged cases a session has no prior: the plain paired t."""
    pairs = session([1.05, 1.15, 1.25], others=3)
    assert ab.session_prior(pairs) is None
    assert judged(pairs)["slowed"] == "no significant change"
