"""Nothing a session made outlives it: its temporary folders, A/B worktrees and the processes
its workers started.

Every worker gets ``MLBENCH_SESSION=<this pid>`` in its environment (the launcher), which
whatever it starts inherits, even in a session of its own, and a temporary folder of the
session as its TMPDIR; the campaign's compile caches and the A/B worktree live in that folder
too. Three paths clean it up:

- the session ends (normally, Ctrl-C, an error): ``atexit``;
- the session is told to end (SIGTERM, SIGHUP): a handler cleans, then lets the signal do what
  it did before (pytest does not catch them);
- the session is killed (SIGKILL): a janitor process, started with the first folder, waits on a
  pipe from the session; when the pipe closes it kills the session's processes, removes the
  worktrees (git worktree remove) and the folders. A janitor killed too leaves the folder to
  the next session, which removes every ``mlbench-session-<pid>-*`` whose pid is dead.

Every folder made here carries the plugin's mark (owned.py), and each of the three paths
removes a folder only when its mark is there: a folder of someone else's that happens to match
the name (a ``mlbench-session-<pid>-notes`` made by hand) is left as it is.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from pytest_mlbench import owned

SESSION_VAR = "MLBENCH_SESSION"
PREFIX = "mlbench-session-"
CLEANED_SIGNALS = ("SIGTERM", "SIGHUP")

# the janitor: stdlib only (``python -S``), reads "dir PATH" / "worktree REPO PATH" lines
# until the session's end of the pipe closes, however the session ended; a folder goes only
# with the mark (argv[2], owned.MARK) in it, and a worktree's own folder with the session's
JANITOR = r"""
import os, shutil, signal, subprocess, sys
session, mark = sys.argv[1], sys.argv[2]
paths = []
for line in sys.stdin:
    kind, _, rest = line.rstrip("\n").partition(" ")
    paths.append((kind, rest))
needle = ("MLBENCH_SESSION=" + session).encode()
for pid in [int(d) for d in os.listdir("/proc") if d.isdigit()]:
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            if needle in f.read().split(b"\0"):
                os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
for kind, rest in reversed(paths):
    if kind == "worktree":
        repo, _, folder = rest.partition(" ")
        if os.path.exists(folder):
            subprocess.run(["git", "-C", repo, "worktree", "remove", "--force", folder],
                           capture_output=True, check=False)
        subprocess.run(["git", "-C", repo, "worktree", "prune"], capture_output=True, check=False)
    elif kind == "dir":
        marked = os.path.join(rest, mark)
        if os.path.isfile(marked) and not os.path.islink(marked) and not os.path.islink(rest):
            shutil.rmtree(rest, ignore_errors=True)
"""
SESSION_WHAT = "a pytest-mlbench session's temporary folder, removed as the session ends"

_lock = threading.Lock()
_state: dict[str, Any] = {"pid": 0, "folder": None, "janitor": None, "cleanups": [],
                          "handlers": False}


def session_env() -> dict[str, str]:
    """What every worker's environment gets: the session's mark and its temporary folder."""
    return {SESSION_VAR: str(os.getpid()), "TMPDIR": session_tmp()}


def session_tmp() -> str:
    """The session's temporary folder, made (with its janitor and handlers) on first use."""
    with _lock:
        if _state["pid"] != os.getpid():  # first use, or a forked child: its own
            _state.update(pid=os.getpid(), folder=None, janitor=None, cleanups=[],
                          handlers=False)
        if _state["folder"] is None:
            sweep_stale(Path(tempfile.gettempdir()))
            folder = owned.mkdtemp(f"{PREFIX}{os.getpid()}-", SESSION_WHAT)
            _state["folder"] = folder
            _start_janitor()
            _tell_janitor(f"dir {folder}")
            atexit.register(_at_exit)
            _state["cleanups"].append(lambda: owned.discard(folder))
        if not _state["handlers"]:  # first made in another thread: set them when we can
            _state["handlers"] = _install_handlers()
        return str(_state["folder"])


def temp_folder(prefix: str) -> str:
    """A new folder inside the session's temporary folder, with the mark (removed with it)."""
    return owned.mkdtemp(prefix, "a folder of a pytest-mlbench session's", dir=session_tmp())


def worktree(repo: Path, folder: Path, remove: Callable[[], None]) -> None:
    """An A/B worktree (``folder``, inside a temp_folder): ``remove`` runs at the session's
    end (or its signal); the janitor has git remove it if the session is killed, and the
    session's folder goes with it."""
    session_tmp()
    with _lock:
        _state["cleanups"].append(remove)
    _tell_janitor(f"worktree {repo} {folder}")


def session_processes(session: int | None = None) -> Iterator[int]:
    """Live processes carrying ``MLBENCH_SESSION=session`` (default: this one's)."""
    needle = f"{SESSION_VAR}={session or os.getpid()}".encode()
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if pid != os.getpid() and needle in f.read().split(b"\0"):
                    yield pid
        except OSError:
            continue


def cleanup() -> None:
    """Kill the session's processes, run the cleanups (worktrees, folders); once."""
    with _lock:
        if _state["pid"] != os.getpid():
            return
        todo, _state["cleanups"] = list(_state["cleanups"]), []
    for pid in list(session_processes()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
    for step in reversed(todo):
        try:
            step()
        except OSError as exc:  # a folder half gone: say so, keep cleaning
            print(f"pytest-mlbench: could not remove a temporary folder: {exc}", file=sys.stderr)


def sweep_stale(root: Path) -> list[Path]:
    """Remove ``mlbench-session-<pid>-*`` folders of sessions that are gone (killed with their
    janitor); the folders removed."""
    gone: list[Path] = []
    try:
        entries = list(root.glob(f"{PREFIX}*"))
    except OSError:
        return gone
    for folder in entries:
        pid = folder.name[len(PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)) and owned.is_marked(folder):
            owned.remove(folder)
            gone.append(folder)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _start_janitor() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        _state["janitor"] = subprocess.Popen(
            [sys.executable, "-S", "-c", JANITOR, str(os.getpid()), owned.MARK],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            text=True, env={"PATH": os.environ.get("PATH", os.defpath)})  # git; nothing else
    except OSError as exc:
        print(f"pytest-mlbench: no janitor for a killed session ({exc}); the next session "
              "removes what this one leaves", file=sys.stderr)


def _tell_janitor(line: str) -> None:
    janitor = _state["janitor"]
    if janitor is not None and janitor.stdin is not None:
        try:
            janitor.stdin.write(line + "\n")
            janitor.stdin.flush()
        except OSError:
            _state["janitor"] = None


def _finish_janitor() -> None:
    janitor = _state["janitor"]
    if janitor is not None and _state["pid"] == os.getpid():
        if janitor.stdin is not None:
            try:
                janitor.stdin.close()
            except OSError:
                pass
        try:
            janitor.wait(10)
        except subprocess.TimeoutExpired:
            janitor.kill()


def _at_exit() -> None:
    cleanup()
    _finish_janitor()


def _install_handlers() -> bool:
    """SIGTERM/SIGHUP handlers where they are still the default; False outside the main
    thread (Python's rule: only it may set them)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    for name in CLEANED_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _on_signal)
    return True


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """Clean, then end as the signal would have ended the session."""
    cleanup()
    _finish_janitor()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
