"""The progress lines: each group's line and verdicts, and the time left foretold from what
earlier passes and cases took, saying when it is a guess. No campaign runs here: a clock of
the test's own drives Progress."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_mlbench.measuring.progress import Progress


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [0.0]
    # progress's own name for time, not the module a campaign beside this test reads too
    monkeypatch.setattr("pytest_mlbench.measuring.progress.time",
                        SimpleNamespace(monotonic=lambda: now[0]))
    return now


def done(progress: Progress, clock: list[float], p: int, name: str, begun: float, at: float,
         cases: int, n: int) -> str:
    lines: list[str] = []
    progress.write = lines.append
    clock[0] = at
    progress.group_done(p, name, begun, cases, n, verdicts=[("passing", "")] * cases)
    return lines[0].split("; ", 1)[1]


def test_later_processes_are_foretold_from_the_last_ones_times(clock: list[float]) -> None:
    """A first group that compiles cold and a cheap last one: the first process's rest is a
    guess from its cases (start-up left out), each later process's rest is the last one's at
    this one's pace. Extrapolating from groups said 721 s left of a run that ended at 237 s."""
    progress = Progress(print, groups=3, passes=3, started=0.0, cases=6)
    # pools start for 10 s; the first group (1 case) takes 30 s
    assert done(progress, clock, 0, "gpt", 10.0, 40.0, 1, 1) == (
        "40 s so far, about 150 s left in the first process (a guess from its 1 case(s) done); "
        "2 faster process(es) to come")
    done(progress, clock, 0, "mlp", 40.0, 50.0, 1, 2)
    assert done(progress, clock, 0, "linreg", 50.0, 90.0, 4, 3) == (
        "90 s so far, the first process done; 2 faster process(es) to come")
    # the second process reaches gpt in 20 s where the first took 40: half its pace, so its
    # rest (50 s of the first's) and a whole third process (90 s of the first's) at half
    assert done(progress, clock, 1, "gpt", 95.0, 110.0, 1, 4) == (
        "110 s so far, about 70 s left (at this process's pace against the last one's)")
    done(progress, clock, 1, "mlp", 110.0, 115.0, 1, 5)
    done(progress, clock, 1, "linreg", 115.0, 135.0, 4, 6)
    assert done(progress, clock, 2, "gpt", 135.0, 155.0, 1, 7) == (
        "155 s so far, about 25 s left (at this process's pace against the last one's)")
    clock[0] = 180.0
    assert progress.eta(9, 2, "linreg") == "180 s in all"


def test_a_session_that_times_nothing_says_its_estimate_is_a_guess(clock: list[float]) -> None:
    progress = Progress(print, groups=2, passes=1, started=0.0, cases=4)
    assert done(progress, clock, 0, "mlp", 5.0, 35.0, 3, 1) == (
        "35 s so far, about 10 s left (a guess from the 3 case(s) done)")
    unknown = Progress(print, groups=4, passes=1, started=0.0)  # no count of cases: by group
    assert done(unknown, clock, 0, "mlp", 0.0, 20.0, 3, 2) == (
        "20 s so far, about 20 s left (a guess from the 2 group(s) done)")


def test_a_groups_line_counts_its_verdicts_and_quotes_each_failure(clock: list[float]) -> None:
    lines: list[str] = []
    progress = Progress(lines.append, groups=1, passes=3, started=0.0)
    clock[0] = 340.0
    progress.group_done(2, "mlp", 330.0, 10, 3)
    progress.group_done(2, "cnn", 330.0, 3, 3,
                        verdicts=[("passing", ""), ("failed", "torch jit (cnn-...) gradient of "
                                                               "k1: differs\nworst element"),
                                  ("skipped", "no gpu"), ("passing", ""), ("passed", "")])
    assert lines == ["mlbench [process 3/3] mlp: 10 case(s) checked and timed in 10.0 s; "
                     "340 s in all",
                     "mlbench [process 3/3] cnn: 3 case(s) checked and timed in 10.0 s "
                     "(3 passing, 1 failed, 1 skipped); 340 s in all",
                     "mlbench   failed: torch jit (cnn-...) gradient of k1: differs"]
