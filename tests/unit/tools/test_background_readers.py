"""tests/background.py: a background session is read only through the fixture its declaration
names, so that tests/conftest.py moves the tests that read it after the others (a fixture of
another name held the test line for 350 s, waiting for its session early)."""

from __future__ import annotations

import pytest

from tests import background


def undeclared(factory: object) -> background.Done:
    return background.result("reader-check", factory)  # type: ignore[arg-type]


def test_a_session_read_through_another_fixture_is_refused_before_it_starts() -> None:
    background.session("reader-check", fixture="declared")(lambda folder: None)  # type: ignore[arg-type,return-value]
    try:
        with pytest.raises(AssertionError, match=r"^fixture 'undeclared' reads background "
                           r"session 'reader-check', declared for fixture 'declared': declare "
                           r"it with @background.session\('reader-check', fixture='undeclared'\)"):
            undeclared(None)
        assert "reader-check" not in background.LANE._runs  # nothing was started
    finally:
        del background.MAKERS["reader-check"], background.FIXTURES["reader-check"]
