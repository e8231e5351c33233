"""The pytest sessions this test suite runs in subprocesses over whole folders of workloads
(the cheaters, the kinds, the float64 optimizer cases): each takes tens of seconds, most of
it in worker processes, and the tests that read its outcomes only wait for it. So they start
as the test session's first test starts, beside the in-process tests and the suites' own
check-only campaign, and a test that asks for one's outcome waits only for what is left of it.
They start in the order the tests will ask for them (tests/conftest.py runs the tests that read
them after the others), two at a time, a session that times something never beside another
that does (they would measure each other). A session no selected test asks for never starts.

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
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TIMEOUT_S = 900
LANES = 2  # sessions run side by side (a 2-core host: the in-process tests take the rest)
START = time.monotonic()  # as the test session imported this module


@dataclass(frozen=True)
class Command:
    """One pytest session: its arguments after ``python -m pytest``, where it runs, its extra
    environment; ``timed`` sessions compile cold (``--mlbench-compile-cache=cold``) unless
    their arguments give a compile cache."""

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
    """The sessions, in the order they were asked for, on ``LANES`` threads: each takes the
    first waiting session it may run, a timed one only while no other timed one runs (two
    would measure each other)."""

    def __init__(self) -> None:
        self.cache = ""  # the test run's shared compile-cache folder
        # the environment as the test session began: a test's monkeypatched variables (the
        # owner marks of tests that count their own processes) must not reach a session
        # started while that test runs
        self.environ: dict[str, str] = dict(os.environ)
        self._runs: dict[str, futures.Future[Done]] = {}
        self._waiting: list[tuple[str, Command, Path, futures.Future[Done]]] = []
        self._timed_running = False
        self._closed = False
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []

    def submit(self, name: str, folders: pytest.TempPathFactory) -> futures.Future[Done]:
        with self._cond:
            if name not in self._runs:
                folder = folders.mktemp(name)
                future: futures.Future[Done] = futures.Future()
                self._runs[name] = future
                self._waiting.append((name, MAKERS[name](folder), folder, future))
                if not self._threads:
                    self._closed = False
                    self._threads = [threading.Thread(target=self._serve, daemon=True,
                                                      name=f"background-{i}")
                                     for i in range(LANES)]
                    for thread in self._threads:
                        thread.start()
                self._cond.notify_all()
            return self._runs[name]

    def _next(self) -> tuple[str, Command, Path, futures.Future[Done]] | None:
        """The first waiting session this thread may start (None: the lane is closed)."""
        with self._cond:
            while True:
                if self._closed:
                    return None
                for i, (_, command, _, _) in enumerate(self._waiting):
                    if not (command.timed and self._timed_running):
                        self._timed_running |= command.timed
                        return self._waiting.pop(i)
                self._cond.wait()

    def _serve(self) -> None:
        while (job := self._next()) is not None:
            name, command, folder, future = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(self._run(command, folder, name))
                except BaseException as exc:  # noqa: BLE001 - handed to the test that waits
                    future.set_exception(exc)
            with self._cond:
                self._timed_running &= not command.timed
                self._cond.notify_all()

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
            elif command.timed and not any(a.startswith("--mlbench-compile-cache") for a in args):
                args.append("--mlbench-compile-cache=cold")  # its compile times: cold ones
        program = command.program or (sys.executable, "-m", "pytest")
        env = {**self.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **command.env}
        if command.program:  # a script's sessions keep their compile cache in its folder
            env.setdefault("XDG_CACHE_HOME", str(folder.with_name(folder.name + "-xdg-cache")))
        if not command.timed and self.cache:  # a script's own torch.compile shares it too
            env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(self.cache, "inductor"))
        done = subprocess.run([*program, *args], cwd=command.cwd, env=env,
                              capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        return Done(done.returncode, done.stdout + done.stderr, folder)

    def close(self) -> None:
        """Wait for the sessions running now; those not started are cancelled."""
        with self._cond:
            self._closed = True
            for _, _, _, future in self._waiting:
                future.cancel()
            self._waiting.clear()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join()
        self._threads = []
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
    """Session ``name``'s outcome, started now if nothing started it. Read by the fixture
    its declaration names: a test that reads it through another is not moved after the
    others (tests/conftest.py) and waits for it early, holding every test after it (a
    ``reuse`` fixture reading ``compile_reuse`` held the test line for 350 s)."""
    # the fixture, or a function made inside it (co_qualname: "run.<locals>.lines_of")
    reader = sys._getframe(1).f_code.co_qualname.split(".")[0]
    if reader != FIXTURES[name]:
        raise AssertionError(f"fixture {reader!r} reads background session {name!r}, declared "
                             f"for fixture {FIXTURES[name]!r}: declare it with "
                             f"@background.session({name!r}, fixture={reader!r})")
    return LANE.submit(name, folders).result()
