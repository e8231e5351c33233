"""What a timed round used, and what the worker holds while timed (issue 56). Runs in the worker.

Every implementation gets the same threads, and a timed turn runs with every thread of its
worker placed on the case's cores (framework_worker._on_timed_cores): a pool sized past the
threads shares those cores and gains nothing. What can gain is what leaves them, or what
changes the controls between two readings, and this module reads both:

- per round, around its clock: the process's CPU seconds over all its threads (one
  CLOCK_PROCESS_CPUTIME_ID read each side, engine/server.CaseServer.round): a thread that
  left the case's cores shows as more cores than the case has;
- per turn (``Turn``: ``begin`` before its first round, ``end`` after the round that ends it):
  the CPU its child processes used over the turn, those reaped (one getrusage) and those alive
  (``/proc/<pid>/task/*/children`` walked only where one ``waitid`` says there is a child);
  every thread's CPU affinity, and that of every child process that ran; the threads and child
  processes held that were not when timing began; the cheap thread controls (torch's, numba's,
  every BLAS and OpenMP pool through a threadpoolctl controller made once);
- while a round runs, every call that sets a thread control to another count than the
  session's, or an affinity mask past the case's cores (``Watch``): a change made for each
  step and undone before the round returns reads right whenever the controls are read.

The parent judges what this reports (checking/cores.py); the full read of every control, at
a case's end, is the adapter's ``threads()`` (the Info command).
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pytest_mlbench.engine.protocol import TurnUsage

# bound as this module loads, before any implementation (as runners.process_time)
_rusage = resource.getrusage
_perf = time.perf_counter
_clock = time.clock_gettime if hasattr(time, "clock_gettime") else None
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc's CPU times' unit


def reaped() -> float:
    """CPU seconds of this process's children that have ended and been waited for (the
    kernel adds a child's to its parent's only then: live ones are read from /proc)."""
    kids = _rusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


# -- calls that change a control while timed ------------------------------------------------------

@dataclass
class Watch:
    """Every call made while a round runs that sets a thread control to another count than
    the session's, or lets a thread run past the case's cores: ``what -> calls``."""

    threads: int = 0
    cores: frozenset[int] = frozenset()
    on: bool = False
    calls: dict[str, int] = field(default_factory=dict)

    def record(self, what: str) -> None:
        if self.on:
            self.calls[what] = self.calls.get(what, 0) + 1

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        """Record while the block runs (a round command's rounds)."""
        was, self.on = self.on, True
        try:
            yield
        finally:
            self.on = was

    def taken(self) -> dict[str, int]:
        found, self.calls = self.calls, {}
        return found


WATCH = Watch()


def _wrap(owner: Any, name: str, check: Callable[..., str | None]) -> None:
    """``owner.name`` replaced by a function that records what ``check(*args)`` names (a
    change) while timed, then calls the original; wrapped once however often installed."""
    original = getattr(owner, name, None)
    if original is None or getattr(original, "mlbench_watched", False):
        return

    @functools.wraps(original)
    def watched(*args: Any, **kwargs: Any) -> Any:
        if WATCH.on:
            what = check(*args, **kwargs)
            if what is not None:
                WATCH.record(what)
        return original(*args, **kwargs)

    watched.mlbench_watched = True  # type: ignore[attr-defined]
    setattr(owner, name, watched)


def _count(label: str, wanted: Callable[[], int]) -> Callable[..., str | None]:
    def check(n: Any, *args: Any, **kwargs: Any) -> str | None:
        return None if _int(n) == wanted() else f"{label}({n!r})"

    return check


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _affinity(pid: Any, mask: Iterable[int], *args: Any) -> str | None:
    cores = set(mask)
    if not cores - WATCH.cores:
        return None
    return f"os.sched_setaffinity(<thread>, {sorted(cores)})"


def _blas_check(controller: Any, n: Any, *args: Any) -> str | None:
    if _int(n) == WATCH.threads:
        return None
    lib = os.path.basename(str(getattr(controller, "filepath", "?")))
    return f"threadpoolctl {getattr(controller, 'internal_api', '?')} ({lib}) set_num_threads({n!r})"


def install_watch(threads: int, cores: Iterable[int]) -> None:
    """Wrap the setters of the thread controls loaded in this process (torch, numba,
    threadpoolctl's controllers, which threadpool_limits goes through) and
    os.sched_setaffinity. Called once the framework is loaded, before any case is built, so an
    implementation that imports a setter by name binds the wrapper."""
    WATCH.threads, WATCH.cores = threads, frozenset(cores)
    if hasattr(os, "sched_setaffinity"):
        _wrap(os, "sched_setaffinity", _affinity)
    torch = sys.modules.get("torch")
    if torch is not None:
        for owner in (torch, getattr(torch, "_C", None)):
            _wrap(owner, "set_num_threads", _count("torch.set_num_threads", lambda: WATCH.threads))
            _wrap(owner, "set_num_interop_threads",
                  _count("torch.set_num_interop_threads", lambda: 1))
    numba = sys.modules.get("numba")
    if numba is not None:
        _wrap(numba, "set_num_threads", _count("numba.set_num_threads", lambda: WATCH.threads))
    try:
        import threadpoolctl
    except ImportError:
        return
    for cls in getattr(threadpoolctl, "_ALL_CONTROLLERS", ()):
        _wrap(cls, "set_num_threads", _blas_check)


# -- the controls, cheaply ------------------------------------------------------------------------

def blas_controller() -> Any:
    """threadpoolctl's view of the BLAS and OpenMP libraries loaded now, made once: finding
    them walks every loaded library (1.5-15 ms in a torch worker), reading each one's count
    afterwards is a call (7-17 us for two)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()


def controls(framework: str, blas: Any) -> dict[str, int]:
    """The thread controls a turn re-reads, each a call: the framework's own that can change
    while it runs (torch's, numba's; XLA's and TensorFlow's pools are fixed once they start)
    and every BLAS and OpenMP pool ``blas`` found."""
    found: dict[str, int] = {}
    if framework == "torch" and "torch" in sys.modules:
        torch = sys.modules["torch"]
        found["torch.get_num_threads()"] = int(torch.get_num_threads())
        found["torch.get_num_interop_threads()"] = int(torch.get_num_interop_threads())
    if framework == "numba" and "numba" in sys.modules:
        found["numba.get_num_threads()"] = int(sys.modules["numba"].get_num_threads())
    for lib in getattr(blas, "lib_controllers", ()):
        name = f"{lib.internal_api}:{os.path.basename(lib.filepath)}"
        found[name] = int(lib.num_threads)
    return found


@dataclass(frozen=True)
class Setting:
    """What the session set in this worker, read as it started (before any case)."""

    framework: str
    threads: int
    cores: frozenset[int]
    blas: Any
    controls: dict[str, int]


def setting(framework: str, threads: int, cores: Iterable[int]) -> Setting:
    """The worker's controls as the session set them; the watch installed."""
    install_watch(threads, cores)
    blas = blas_controller()
    return Setting(framework, threads, frozenset(cores), blas, controls(framework, blas))


# -- threads, child processes and their CPU -------------------------------------------------------

def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:  # ended in between, or no /proc
        return None


def task_ids(pid: int | str = "self") -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def has_children() -> bool:
    """Whether this process has a child, live or ended and not yet waited for: one waitid that
    waits for nothing (WNOHANG, WNOWAIT), ECHILD when there is none. A worker that starts no
    process, every honest one, walks no /proc for its children."""
    if not hasattr(os, "waitid"):
        return True
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def descendants(tids: Iterable[int] | None = None) -> list[int]:
    """Every process started by this one's threads (``tids``, if already listed), and by
    those, down the tree."""
    if not has_children():
        return []
    found: list[int] = []
    todo = [("self", list(task_ids() if tids is None else tids))]
    while todo:
        pid, threads = todo.pop()
        for tid in threads:
            kids = _read(f"/proc/{pid}/task/{tid}/children") or ""
            for kid in (int(k) for k in kids.split()):
                found.append(kid)
                todo.append((str(kid), task_ids(kid)))
    return found


def process_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` over all its threads (its CPU clock, to the nanosecond:
    /proc's ticks are 10 ms, a smoke round's child may run less), and of the children it has
    waited for (ticks: their CPU is added to its parent's only then)."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    waited = (int(fields[13]) + int(fields[14])) / TICK  # cutime, cstime
    try:
        # Linux's CPU clock of a process: (~pid << 3) | CPUCLOCK_SCHED (clock_getcpuclockid)
        return _clock(((~pid) << 3) | 2) + waited  # type: ignore[misc]
    except (OSError, TypeError):
        return (int(fields[11]) + int(fields[12])) / TICK + waited  # utime, stime


def name_of(path: str) -> str:
    return (_read(f"{path}/comm") or "?").strip()


def _mask(tid: int) -> frozenset[int] | None:
    try:
        return frozenset(os.sched_getaffinity(tid))
    except OSError:
        return None


@dataclass
class Turn:
    """One case's holdings when timing began (its first round command) and as its current
    turn began, kept in the worker between the turn's first round and its end."""

    tids: set[int] | None = None  # threads when timing began
    pids: set[int] | None = None  # child processes then
    began: float = 0.0
    children: dict[int, float] = field(default_factory=dict)  # each one's CPU as the turn began
    reaped: float = 0.0

    def begin(self) -> None:
        """A turn's first round is about to run (the worker on the case's cores)."""
        if self.tids is None:  # timing begins
            self.tids = set(task_ids())
            kids = descendants(self.tids)
            self.pids = set(kids)
            WATCH.taken()  # another case's calls are not this one's
        else:
            kids = descendants()
        self.children = {k: process_cpu(k) for k in kids}
        self.reaped, self.began = reaped(), _perf()

    def end(self, set_: Setting) -> TurnUsage:
        """What the turn used beyond its rounds' own threads, and what the worker holds now."""
        span = _perf() - self.began
        tids = task_ids()
        kids = descendants(tids)
        now = {k: process_cpu(k) for k in kids}
        used = {k: c - self.children.get(k, 0.0) for k, c in now.items()}
        children_cpu = reaped() - self.reaped + sum(used.values()) \
            - sum(c for k, c in self.children.items() if k not in now)
        ran = {k: name_of(f"/proc/{k}") for k, u in used.items() if u > 0}
        widened = self._widened(set_.cores, tids, ran)
        read = controls(set_.framework, set_.blas)
        changed = {k: (v, set_.controls[k]) for k, v in read.items()
                   if k in set_.controls and v != set_.controls[k]}
        return TurnUsage(
            span=span, children_cpu=max(children_cpu, 0.0), children=ran, widened=widened,
            cores=sorted(set_.cores), controls=changed, set_while_timed=WATCH.taken(),
            new_threads={t: name_of(f"/proc/self/task/{t}") for t in tids
                         if t not in (self.tids or ())},
            new_processes={k: name_of(f"/proc/{k}") for k in kids if k not in (self.pids or ())})

    @staticmethod
    def _widened(cores: frozenset[int], tids: Iterable[int],
                 ran: dict[int, str]) -> dict[str, list[int]]:
        """Threads of this process, and of the child processes that ran, that may run on a
        core past the case's: what each may run on."""
        found = {}
        for tid in tids:
            mask = _mask(tid)
            if mask is not None and mask - cores:
                found[f"thread {tid} ({name_of(f'/proc/self/task/{tid}')})"] = sorted(mask)
        for pid, name in ran.items():
            for tid in task_ids(pid):
                mask = _mask(tid)
                if mask is not None and mask - cores:
                    found[f"child process {pid} ({name})"] = sorted(mask)
                    break
        return found
