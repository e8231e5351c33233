"""The pytest sessions this test suite runs in subprocesses over whole folders of workloads
(the cheaters, the kinds, the float64 optimizer cases): each takes tens of seconds, most of
it in worker processes, and the tests that read its outcomes only wait for it. So they start
as the test session's first test starts, beside the in-process tests and the suites' own
check-only campaign, and a test that asks for one's outcome waits only for what is left of it.
They start in the order the tests will ask for them (tests/conftest.py runs the tests that read
them after the others), on two lanes: the sessions that time something one after another (two
would measure each other), and the check-only ones one after another beside them. A session
no selected test asks for never starts.

A module declares one with ``@background.session(name)`` on a function that makes its folder
and returns its ``Command``; its fixture ``name`` (the name a test asks for) returns
``background.result(name, tmp_path_factory)``. A session that times nothing shares one
compile-cache folder with the others of the test run (``--mlbench-compile-cache``): torch's
inductor builds its precompiled header and the graphs they share once.
"""

from __future__ import annotations

import concurrent.futures as futures
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TIMEOUT_S = 900
START = time.monotonic()  # as the test session imported this module


@dataclass(frozen=True)
class Command:
    """One pytest session: its arguments after ``python -m pytest``, where it runs, its extra
    environment; ``timed`` sessions get no shared compile cache (they report compile times)."""

    args: list[str]
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)
    timed: bool = False
    program: tuple[str, ...] = ()  # instead of ``python -m pytest`` (a script that runs it)


@dataclass(frozen=True)
class Done:
    returncode: int
    output: str
    folder: Path


Maker = Callable[[Path], Command]
MAKERS: dict[str, Maker] = {}
FIXTURES: dict[str, str] = {}  # the fixture that reads each


def session(name: str, fixture: str = "") -> Callable[[Maker], Maker]:
    """Declare background session ``name``, read by fixture ``fixture`` (default: ``name``)
    of the declaring module (of every module, when declared in a conftest.py)."""
    def register(make: Maker) -> Maker:
        MAKERS[name], FIXTURES[name] = make, fixture or name
        return make
    return register


def wants(item: pytest.Item, name: str) -> bool:
    if FIXTURES[name] not in getattr(item, "fixturenames", ()):
        return False
    # by file, not module name: a test module imported by another test module too exists
    # under two names (test_ab, tests.sessions.test_ab), and the later import registers
    home = Path(MAKERS[name].__code__.co_filename).resolve()
    return home.name == "conftest.py" or Path(str(item.fspath)).resolve() == home


class Lane:
    """The sessions, in the order they were asked for, on two threads: the timed ones one at a
    time, the check-only ones one at a time beside them."""

    def __init__(self) -> None:
        self.cache = ""  # the test run's shared compile-cache folder
        # the environment as the test session began: a test's monkeypatched variables (the
        # owner marks of tests that count their own processes) must not reach a session
        # started while that test runs
        self.environ: dict[str, str] = dict(os.environ)
        # two lanes: the sessions that time something, one at a time (two timed sessions would
        # measure each other), and those that only check, one at a time beside them
        self._pools: dict[bool, futures.ThreadPoolExecutor] = {}
        self._runs: dict[str, futures.Future[Done]] = {}

    def submit(self, name: str, folders: pytest.TempPathFactory) -> futures.Future[Done]:
        if name not in self._runs:
            folder = folders.mktemp(name)
            command = MAKERS[name](folder)
            pool = self._pools.get(command.timed)
            if pool is None:
                pool = self._pools[command.timed] = futures.ThreadPoolExecutor(
                    1, thread_name_prefix="background-timed" if command.timed else "background")
            self._runs[name] = pool.submit(self._run, command, folder, name)
        return self._runs[name]

    def _run(self, command: Command, folder: Path, name: str) -> Done:
        began = time.monotonic()
        try:
            return self._run_command(command, folder)
        finally:  # when each ran, for a look at how the test run's streams overlap
            with (folder.parent / "background.log").open("a") as log:
                log.write(f"{name} {began - START:.1f} {time.monotonic() - START:.1f}\n")

    def _run_command(self, command: Command, folder: Path) -> Done:
        args = list(command.args)
        if not command.program:  # a pytest session: its temporary files under its folder
            args.append(f"--basetemp={folder / 'basetemp'}")
            if not command.timed and self.cache:
                args.append(f"--mlbench-compile-cache={self.cache}")
        program = command.program or (sys.executable, "-m", "pytest")
        env = {**self.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **command.env}
        if not command.timed and self.cache:  # a script's own torch.compile shares it too
            env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(self.cache, "inductor"))
        done = subprocess.run([*program, *args], cwd=command.cwd, env=env,
                              capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        return Done(done.returncode, done.stdout + done.stderr, folder)

    def close(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=True, cancel_futures=True)
        self._pools.clear()
        self._runs.clear()


LANE = Lane()


def start(items: Iterable[pytest.Item], folders: pytest.TempPathFactory, cache: str) -> None:
    """Start the sessions the selected tests ask for, in the order the tests will ask."""
    LANE.cache, LANE.environ = cache, dict(os.environ)
    for item in items:
        for name in MAKERS:
            if wants(item, name):
                LANE.submit(name, folders)


def result(name: str, folders: pytest.TempPathFactory) -> Done:
    """Session ``name``'s outcome, started now if nothing started it."""
    return LANE.submit(name, folders).result()
