"""The A/B gate's verdict is the session's last line: a real pytest session (pytester, in
process, no worker started) whose conftest registers the A/B judge with a judgement made here,
as RunState would after the campaign. The regression gate's are in
tests/sessions/test_save_and_gate.py."""

from __future__ import annotations

import pytest

CONFTEST = """
from pytest_mlbench import stats
from pytest_mlbench.judging import ab, regression
from pytest_mlbench.options import GateSettings

SLOWER = stats.Ratio(1.954, 1.5, 2.4, 0.0058, 0.99)
SAME = stats.Ratio(1.01, 0.9, 1.1, 0.4, 0.6)


def pytest_configure(config):
    gate = GateSettings(baselines="", save="", save_mode="", save_partial=False, gate="",
                        threshold=0.10, alpha=0.01)
    judge = ab.ABSession(config, "HEAD~1 (0123456789)", gate)
    if {verdict!r} != "none":
        rows = [regression.Row("mlp-jax-jit-cpu-fp32", "no significant change", 0.1,
                               ratio=SAME)]
        if {verdict!r} == "slower":
            rows.append(regression.Row("gnn-numpy-eager-cpu-fp32", "SLOWER", 0.1,
                                       ratio=SLOWER))
        judge.judgement = regression.Judgement(tuple(rows))
    config.pluginmanager.register(judge, "mlbench-ab")
"""


def session(pytester: pytest.Pytester, verdict: str, *args: str) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST.format(verdict=verdict))
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def last_line(result: pytest.RunResult) -> str:
    line = result.outlines[-1].strip("= ")
    return line.rsplit(" in ", 1)[0]


def test_a_slower_case_makes_the_last_line_a_failure(pytester: pytest.Pytester) -> None:
    result = session(pytester, "slower", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "mlbench A/B: FAILED: 1 of 2 judged benchmarks slower: gnn-numpy-eager-cpu-fp32 "
        "+95.4% (p=0.0058)",
        "*short test summary info*",
        "FAILED mlbench ab gate - 1 of 2 judged benchmarks slower: gnn-numpy-eager-*"])
    assert last_line(result) == "1 failed, 1 passed"
    junit = (pytester.path / "junit.xml").read_text()
    assert 'failures="1"' in junit and 'name="mlbench ab gate"' in junit


def test_a_passed_gate_says_how_many_it_judged_and_counts_nowhere(
        pytester: pytest.Pytester) -> None:
    result = session(pytester, "same", "-v")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["mlbench A/B: passed (1 judged, none significantly slower)"])
    assert last_line(result) == "1 passed"
    assert "mlbench ab gate" not in result.stdout.str()  # no line of its own, even with -v


def test_nothing_judged_is_a_failure_on_the_last_line(pytester: pytest.Pytester) -> None:
    result = session(pytester, "none", "-v", "-x")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["FAILED mlbench ab gate - nothing judged: no mlbench case ran"])
    assert last_line(result) == "1 failed, 1 passed"
    out = result.stdout.str()
    assert "stopping after" not in out and "[200%]" not in out  # -x and -v: as they were
