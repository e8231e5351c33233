"""A session that ends in any way (normally, SIGTERM, SIGHUP, SIGKILL) leaves no process, temp
folder or worktree behind (pytest_mlbench/engine/leftovers.py): what its workers started, even in a
session of their own, is killed, and its temporary folder (compile caches, the workers'
TMPDIR, the A/B worktree) is removed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from pytest_mlbench.engine import leftovers

SESSION = """
import os, sys
from pytest_mlbench.engine import leftovers
from pytest_mlbench.engine.launcher import Launch, Pool, WorkerSpec
launch = Launch.now()
caches = leftovers.temp_folder("mlbench-caches-")
pool = Pool(WorkerSpec("pytest_mlbench.engine.faults:faulty", 1, {}, launch=launch),
            start_timeout=30.0)
pool.start()
child = pool.call("spawn")[0]
tmp = pool.call("environment", ("TMPDIR",))[0]["TMPDIR"]
print(leftovers.session_tmp(), caches, tmp, child, *pool.pids, flush=True)
sys.stdin.read()  # until the test ends this session
"""

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait(what: str, done: callable, seconds: float = 15.0) -> None:  # type: ignore[valid-type]
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def default_signals() -> None:
    """In the session's child: SIGTERM and SIGHUP at their defaults, whatever the test runner
    inherited (under nohup SIGHUP is ignored, and so would be the child's)."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@linux
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL, None])
def test_a_session_ended_any_way_leaves_nothing_behind(how: signal.Signals | None) -> None:
    session = subprocess.Popen([sys.executable, "-c", SESSION], preexec_fn=default_signals,
                               stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert session.stdout is not None and session.stdin is not None
    folder, caches, tmp, *pids = session.stdout.readline().split()
    child, worker = int(pids[0]), int(pids[1])
    assert Path(caches).parent == Path(folder) == Path(tmp) and Path(folder).is_dir()
    assert not _gone(child) and not _gone(worker)
    if how is None:
        session.stdin.close()  # the session ends by itself
    else:
        session.send_signal(how)
    session.wait(30)
    if how is not None:
        assert session.returncode == -how
    _wait(f"the worker's setsid child {child} outlived the session", lambda: _gone(child))
    _wait(f"worker {worker} outlived the session", lambda: _gone(worker))
    _wait(f"{folder} outlived the session", lambda: not Path(folder).exists())


def test_folders_of_dead_sessions_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    stale = tmp_path / f"{leftovers.PREFIX}{dead}-abc"
    live = tmp_path / f"{leftovers.PREFIX}{os.getpid()}-abc"
    other = tmp_path / "mlbench-caches-xyz"  # an older name, owner unknown: left alone
    for f in (stale, live, other):
        (f / "inductor").mkdir(parents=True)
    assert leftovers.sweep_stale(tmp_path) == [stale]
    assert not stale.exists() and live.exists() and other.exists()


def test_the_session_folder_is_under_the_users_tmpdir() -> None:
    assert Path(leftovers.session_tmp()).parent == Path(tempfile.gettempdir())
    assert leftovers.session_env()["MLBENCH_SESSION"] == str(os.getpid())


WORKTREE_SESSION = """
import sys
from pathlib import Path
from pytest_mlbench.judging import ab
base = ab.prepare(Path(sys.argv[1]), Path(sys.argv[1]) / "suites", "HEAD")
print(base.side.path[0], flush=True)
sys.stdin.read()
"""


@linux
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_an_ab_worktree_is_removed_when_the_session_is_killed(
        tmp_path: Path, how: signal.Signals) -> None:
    repo = tmp_path / "repo"
    (repo / "suites").mkdir(parents=True)
    (repo / "suites" / "x.txt").write_text("x")

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                              text=True).stdout

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    session = subprocess.Popen([sys.executable, "-c", WORKTREE_SESSION, str(repo)],
                               preexec_fn=default_signals,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert session.stdout is not None
    folder = Path(session.stdout.readline().strip())
    assert (folder / "suites" / "x.txt").is_file() and len(git("worktree", "list").splitlines()) == 2
    session.send_signal(how)
    session.wait(30)
    _wait(f"worktree {folder} outlived the session", lambda: not folder.exists())
    _wait("git still lists the worktree",
          lambda: len(git("worktree", "list").splitlines()) == 1)
