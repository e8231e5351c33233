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

from pytest_mlbench import owned
from pytest_mlbench.engine import leftovers

SESSION = """
import os, sys
from pytest_mlbench import owned
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


def _dead_pid() -> str:
    return subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()


def user_files(folder: Path) -> dict[str, str]:
    """A folder of someone's own files (a thesis, a subfolder of notes); what it holds."""
    (folder / "notes").mkdir(parents=True)
    (folder / "thesis.tex").write_text("\\documentclass{book}")
    (folder / "notes" / "monday.txt").write_text("read the proofs")
    return {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*") if p.is_file()}


def test_folders_of_dead_sessions_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    dead = _dead_pid()
    stale = tmp_path / f"{leftovers.PREFIX}{dead}-abc"
    live = tmp_path / f"{leftovers.PREFIX}{os.getpid()}-abc"
    other = tmp_path / "mlbench-caches-xyz"  # an older name, owner unknown: left alone
    for f in (stale, live, other):
        owned.make(f, "a test's session folder")
        (f / "inductor").mkdir()
    assert leftovers.sweep_stale(tmp_path) == [stale]
    assert not stale.exists() and live.exists() and other.exists()


def test_a_folder_named_like_a_dead_sessions_but_not_made_by_one_is_kept(tmp_path: Path) -> None:
    """The sweep matches names; a user's folder that happens to match (no mark) stays whole."""
    mine = tmp_path / f"{leftovers.PREFIX}{_dead_pid()}-notes"
    held = user_files(mine)
    assert leftovers.sweep_stale(tmp_path) == []
    assert {str(p.relative_to(mine)): p.read_text() for p in mine.rglob("*")
            if p.is_file()} == held


def test_the_janitor_removes_a_marked_folder_and_leaves_a_users_folder(tmp_path: Path) -> None:
    """A killed session's janitor is told each folder by the session; a line naming a folder
    without the mark (a user's, whatever put its name there) removes nothing."""
    ours = owned.make(tmp_path / "ours", "a test's session folder")
    (ours / "caches").mkdir()
    mine = tmp_path / "mine"
    held = user_files(mine)
    done = subprocess.run([sys.executable, "-S", "-c", leftovers.JANITOR, "999999999",
                           owned.MARK], input=f"dir {mine}\ndir {ours}\n", text=True,
                          capture_output=True, timeout=60, env={"PATH": os.environ["PATH"]})
    assert done.returncode == 0, done.stderr
    assert not ours.exists()
    assert {str(p.relative_to(mine)): p.read_text() for p in mine.rglob("*")
            if p.is_file()} == held


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


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def _repo(repo: Path) -> Path:
    """A git repository of one commit holding suites/x.txt."""
    (repo / "suites").mkdir(parents=True)
    (repo / "suites" / "x.txt").write_text("x")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return repo


@linux
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_an_ab_worktree_is_removed_when_the_session_is_killed(
        tmp_path: Path, how: signal.Signals) -> None:
    repo = _repo(tmp_path / "repo")

    def git(*args: str) -> str:
        return _git(repo, *args)

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


def test_an_ab_worktree_whose_folder_lost_its_mark_is_not_removed(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   ) -> None:
    """The A/B side's removal goes through the mark: git takes its worktree back, and the
    folder around it goes only while it carries the mark (here a user's files stand in its
    place, the mark gone), said in one line."""
    from pytest_mlbench.judging import ab

    repo = _repo(tmp_path / "repo")
    base = ab.prepare(repo, repo / "suites", "HEAD")
    tree = Path(base.side.path[0])
    folder = tree.parent
    assert (tree / "suites" / "x.txt").is_file() and owned.is_marked(folder)
    (folder / owned.MARK).unlink()
    held = user_files(folder / "mine")
    base.close()
    assert not tree.exists()  # git's own worktree remove
    assert {str(p.relative_to(folder / "mine")): p.read_text()
            for p in (folder / "mine").rglob("*") if p.is_file()} == held
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and owned.MARK in err[0] and "nothing was removed" in err[0]
    owned.mark(folder, "the test's, again")  # the session's end removes it with its folder
    base = ab.prepare(repo, repo / "suites", "HEAD")  # and a marked one goes whole
    base.close()
    assert not Path(base.side.path[0]).parent.exists()
