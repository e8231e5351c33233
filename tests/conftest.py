"""Fixtures shared by test files: the one --benchmark-disable session over every cheating and
buggy implementation in tests/cheats/ (test_cheaters.py, test_checks.py read its outcomes), run
once per test session because it starts a worker per framework."""

from __future__ import annotations

import pytest

from tests.cheat_session import Session, run


@pytest.fixture(scope="session")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Session:
    """Every cheater and broken implementation with --benchmark-disable (nothing timed, every
    check, one audited round), single-device and two workers."""
    return run(tmp_path_factory.mktemp("checked"), "--benchmark-disable",
               "--mlbench-workers=1,2", "-k", "not overclaim and not auditguess")
