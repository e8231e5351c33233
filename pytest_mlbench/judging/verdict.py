"""A gate's verdict as a test report pytest counts, so the session's last line says it.

A failed gate (a slower case, or nothing judged) is one failed report, ``mlbench gate`` or
``mlbench ab gate``: pytest's final line then reads ``1 failed, 10 passed in ...``, its short
test summary names the slower cases (``FAILED mlbench ab gate - 1 of 9 judged benchmarks
slower: ...``) and --junitxml records it. A passed gate is one report counted nowhere (no letter,
no category), which keeps --junitxml's record and clears ``--lf``'s memory of an earlier failed
gate. The session objects that judge (judging/sessions.py, judging/ab.py) send it from their
``pytest_sessionfinish`` and answer ``pytest_report_teststatus`` for it with ``status``.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

GATE = "mlbench gate"
AB = "mlbench ab gate"  # no "/": junit and --lf read a node id as a path
_MARK = "mlbench_verdict"  # the attribute that tells a verdict's report from a test's
_SENDING, _SENT = "sending", "sent"


class Failure:
    """The failed verdict as a report's longrepr: the text pytest's failure section prints,
    and ``reprcrash.message``, the line its short test summary quotes."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.reprcrash = self

    def toterminal(self, out: Any) -> None:
        out.line(self.message)

    def __str__(self) -> str:
        return self.message


def report(session: pytest.Session, name: str, failure: str | None) -> None:
    """Send the verdict ``name`` to every plugin that reads test reports: failed with
    ``failure`` (one line: what failed), passed when None. Sent after every test has run, so it
    stops nothing: -x/--maxfail is set aside while it is sent."""
    config = session.config
    rep = pytest.TestReport(nodeid=name, location=(name, None, name), keywords={name: 1},
                            outcome="failed" if failure else "passed",
                            longrepr=cast(Any, Failure(failure)) if failure else None,
                            when="call")
    setattr(rep, _MARK, _SENDING)
    maxfail, config.option.maxfail = config.option.maxfail, 0
    try:
        config.hook.pytest_runtest_logreport(report=rep)
    finally:
        config.option.maxfail = maxfail
        setattr(rep, _MARK, _SENT)


def status(report: Any) -> tuple[str, str, str] | None:
    """``pytest_report_teststatus`` for a verdict's report, None for any other: a failure
    counts as ``failed``, a pass counts nowhere. While the report is sent it has no letter
    or word, since the tests' progress line has ended; afterwards a failure's word is FAILED,
    the word the short test summary starts its line with."""
    mark = getattr(report, _MARK, None)
    if mark is None:
        return None
    if not report.failed:
        return ("", "", "")
    return ("failed", "", "") if mark == _SENDING else ("failed", "F", "FAILED")
