"""Fixtures shared by test files: the one --benchmark-disable session over every cheating and
buggy implementation in tests/cheats/ (test_cheaters.py, test_checks.py read its outcomes), run
once per test session because it starts a worker per framework."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_mlbench.storing import compile_cache
from tests import background, modules_snapshot
from tests.background import Command
from tests.cheat_session import Session, command, read

modules_snapshot.install()  # pytester's in-process runs beside the campaign thread


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that read a background session (tests/background.py) run after the other
    tests of this folder, so that the session runs beside those rather than being waited for;
    anything outside this folder (the suites' cases) keeps its place after them."""
    here = Path(__file__).resolve().parent
    late = {str(item.fspath) for item in items
            if any(background.wants(item, name) for name in background.MAKERS)}

    def place(item: pytest.Item) -> int:  # whole modules move: their fixtures stay set up once
        if here not in Path(str(item.fspath)).resolve().parents:
            return 2
        return 1 if str(item.fspath) in late else 0

    items.sort(key=place)  # stable: the order within each part is kept


@pytest.fixture(scope="session", autouse=True)
def _background_sessions(request: pytest.FixtureRequest,
                         tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The subprocess sessions the selected tests read (tests/background.py), started now,
    beside the tests; their check-only sessions share one compile cache (this session's
    --mlbench-compile-cache, else a folder of this test run)."""
    modules_snapshot.TEMPORARY.append(tmp_path_factory.getbasetemp().resolve())
    cache = request.config.getoption("mlbench_compile_cache", None) or str(
        tmp_path_factory.getbasetemp() / "compile-cache")
    with pytest.MonkeyPatch.context() as patch:
        # the tests that compile with torch in this process share it too (inductor's
        # precompiled header is built once a run, not once a folder)
        patch.setenv("TORCHINDUCTOR_CACHE_DIR",
                     os.environ.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(cache, "inductor"))
        # the in-process sessions that give no --mlbench-compile-cache use it too, never the
        # user's own cache folder
        patch.setattr(compile_cache, "default_folder", lambda environ=None: cache)
        background.start(request.session.items, tmp_path_factory, cache)
        yield
        background.LANE.close()


@background.session("checked")
def checked_command(folder: Path) -> Command:
    """Every cheater and broken implementation with --benchmark-disable (nothing timed, every
    check, one audited round), single-device and two workers."""
    return command(folder, "--benchmark-disable", "--mlbench-workers=1,2",
                   "-k", "not overclaim and not auditguess and not aheadinfer and not clock")


@pytest.fixture(scope="session")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Session:
    return read(background.result("checked", tmp_path_factory))
