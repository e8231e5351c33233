"""A pool of long-lived worker processes driven by commands over sockets, with timeouts.

Each worker is a fresh interpreter (``python -m pytest_mlbench.engine.child``), started with
its own environment, working directory and even its own interpreter, so that a worker can run
another revision's code or another environment's frameworks (the A/B gate). It applies its
environment before anything imports a framework, builds a handler from ``target`` and answers
commands until told to stop. The parent sends a command to every worker and waits for every
reply, so a worker that raises, dies or never answers surfaces as a WorkerError of one line,
not as a silent hang: what it raised and where (the innermost frame outside this package),
or how it ended (exit code, signal name) with the last lines of its stderr, which the parent
drains from a pipe (passing them on) and keeps, or that it did not answer in time. Every
worker carries MLBENCH_POOL in its environment, and whatever it starts inherits it: closing
the pool kills those too, even in a session of their own (setsid) or reparented away.
``pause``/``resume`` stop and continue the workers (SIGSTOP/SIGCONT): an idle worker's
thread pools cannot spin on a core another worker is being timed on. Closing the pool always
ends every worker: stop, terminate, kill, reap.
"""

from __future__ import annotations

import collections
import importlib
import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from pytest_mlbench.engine import leftovers, wire
from pytest_mlbench.engine.protocol import PROTOCOL

# seconds a worker gets to leave by itself after "stop" before it is terminated, then killed
STOP_GRACE_S = 5.0
# seconds the other ranks get to answer once one rank reported a failure
FAILED_GRACE_S = 20.0
STDERR_TAIL = 12  # lines of a worker's stderr kept to show when it dies
STDERR_KEPT = 400  # lines kept to find a hung worker's stack in (every thread's, by faulthandler)
STACK_WAIT_S = 3.0  # how long a hung worker gets to write its stack once asked (SIGUSR1)
STACK_FRAMES = 4  # innermost frames of the serving thread shown in a timeout's message
POOL_VAR = "MLBENCH_POOL"  # in every worker's environment, inherited by what it starts


class WorkerError(RuntimeError):
    """A worker raised, died or did not answer in time; the message names the rank and
    carries the worker's traceback when it had one to send."""


class WorkerCrashed(WorkerError):
    """A worker raised an exception or exited without answering."""


class WorkerTimeout(WorkerError):
    """A worker did not answer within the timeout (hung, deadlocked, or far too slow)."""


class Handler(Protocol):
    """What ``target(rank, world, config)`` builds inside each worker."""

    def __call__(self, command: str, payload: Any) -> Any: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Launch:
    """What a worker starts from: the environment, the import path and the working folder,
    taken at one moment. A campaign that runs beside other tests (a session that times nothing
    checks its cases while the rest of the session runs) takes it as it starts: a test's
    monkeypatched variable, inserted path or changed folder never reaches its workers."""

    environ: Mapping[str, str]
    path: tuple[str, ...]
    cwd: str

    @classmethod
    def now(cls) -> Launch:
        # the session's temporary folder, janitor and signal handlers, made here since the
        # session takes its snapshot in the main thread (signal handlers must be set there)
        leftovers.session_tmp()
        return cls(dict(os.environ), tuple(p for p in sys.path if p and os.path.isdir(p)),
                   os.getcwd())


@dataclass(frozen=True)
class WorkerSpec:
    """What to start: ``target`` is ``"module:function"``, importable in the worker, returning a
    Handler; ``env`` is applied before that import (XLA_FLAGS must precede jax); ``python``
    and ``path`` choose the interpreter and the code the worker imports (default: this ones);
    ``cores[rank]``, when given, is the set of cores rank may run on; ``launch`` what the
    worker starts from (default: this process as the pool spawns)."""

    target: str
    world: int
    config: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    python: str = ""
    path: Sequence[str] = ()
    cores: Sequence[Sequence[int]] = ()
    launch: Launch | None = None


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it; a tiny race remains until the
    rendezvous binds it, which is the usual trade-off of torch's own tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def resolve(target: str) -> Callable[..., Handler]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def summary(exc: BaseException) -> str:
    """One line for an exception: its type and message, and the innermost frame outside
    this package (the implementation's line), else the innermost frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    theirs = [f for f in frames if f"{os.sep}pytest_mlbench{os.sep}" not in f.filename]
    at = (theirs or frames)[-1:] if frames else []
    where = f" (at {at[0].filename}:{at[0].lineno} in {at[0].name})" if at else ""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}{': ' + text[0] if text else ''}{where}"


def _send_error(conn: Connection, rank: int, exc: BaseException) -> None:
    try:
        conn.send(("error", f"worker {rank} (pid {os.getpid()}) raised {summary(exc)}"))
    except (BrokenPipeError, OSError):  # the parent is gone: nobody is left to tell
        pass


def worker_main(rank: int, spec: WorkerSpec, conn: Connection) -> None:
    """Entry point of one worker process (see child.py)."""
    handler: Handler | None = None
    try:
        handler = resolve(spec.target)(rank, spec.world, dict(spec.config))
        conn.send(("ok", {"pid": os.getpid(), "protocol": PROTOCOL}))
        while True:
            command, payload = conn.recv()
            if command == "stop":
                break
            conn.send(("ok", handler(command, payload)))
    except BaseException as exc:  # report everything, even SystemExit, then leave with an error
        _send_error(conn, rank, exc)
        raise SystemExit(1) from None
    finally:
        if handler is not None:
            handler.close()
        conn.close()


def _child_env(spec: WorkerSpec, launch: Launch) -> dict[str, str]:
    env = dict(launch.environ)
    env["PYTHONPATH"] = os.pathsep.join(list(spec.path) or launch.path)
    env.update(leftovers.session_env())  # its mark and TMPDIR: nothing it makes outlives us
    env.update(spec.env)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def exit_text(code: int | None) -> str:
    """``exited with code 3``, ``exited with signal 11 (SIGSEGV)``, ``is still running``."""
    if code is None:
        return "is still running"
    if code < 0:
        try:
            name = f" ({signal.Signals(-code).name})"
        except ValueError:
            name = ""
        return f"exited with signal {-code}{name}"
    return f"exited with code {code}"


def hint(code: int | None) -> str:
    """What to do about a worker that ended that way."""
    if code is not None and code < 0 and -code != signal.SIGKILL:
        return (" (a crash in native code, or a signal sent to it: run the case alone with "
                "PYTHONFAULTHANDLER=1 to see where)")
    if code is not None and code < 0:
        return " (killed: by the out-of-memory killer, or by hand)"
    if code == 0:
        return " (the implementation or a library ended the process: os._exit or sys.exit)"
    return ""


class StderrTail:
    """A worker's stderr, passed on to this process's as it comes, its last lines kept to be
    shown when the worker dies (a garbage XLA_FLAGS is an error line there and nowhere else)."""

    def __init__(self, stream: Any) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self.kept: collections.deque[str] = collections.deque(maxlen=STDERR_KEPT)
        self.dump: list[str] = []  # faulthandler's dump of a native crash, kept out of the rest
        self.count = 0  # lines read so far (blank ones too: a stack's blocks end with one)
        self._more = threading.Condition()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True,
                                        name="mlbench-worker-stderr")
        self._thread.start()

    def _pump(self, stream: Any) -> None:
        with stream:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf8", "replace").rstrip()
                # faulthandler's dump of a native crash, and all after it, goes to ``dump``
                # only: it names the harness's frames, and would crowd out of ``lines`` what
                # the worker said before (the crash's one line says where it was)
                if self.dump or line.startswith("Fatal Python error"):
                    self.dump.append(line[:300])
                    continue
                try:
                    os.write(2, raw)
                except OSError:  # our stderr closed: keep the tail all the same
                    pass
                with self._more:
                    if line.strip():
                        self.lines.append(line.strip()[:300])
                    self.kept.append(line[:300])
                    self.count += 1
                    self._more.notify_all()

    def text(self, wait: float = 1.0) -> str:
        """The kept lines as one line (`` | `` between them), after ``wait`` seconds at most
        for the pipe to drain; empty when the worker wrote nothing."""
        self._thread.join(wait)
        return " | ".join(self.lines)

    def written_after(self, mark: int, wait: float, quiet: float = 0.3) -> list[str]:
        """The lines read after the ``mark``-th, once the worker has been silent for
        ``quiet`` seconds since its first one (or ``wait`` seconds have passed)."""
        deadline = time.monotonic() + wait
        with self._more:
            seen = -1
            while time.monotonic() < deadline:
                if self.count == seen and self.count > mark:
                    break
                seen = self.count
                self._more.wait(min(quiet, max(deadline - time.monotonic(), 0)))
            new = self.count - mark
            return list(self.kept)[-new:] if 0 < new <= len(self.kept) else []


def serving_stack(lines: Sequence[str], frames: int = STACK_FRAMES) -> str:
    """From a faulthandler dump of every thread, the innermost ``frames`` frames of the thread
    that serves commands (the one inside ``worker_main``; else the current thread), as
    ``file.py:LINE fn < file.py:LINE fn``: where a hung worker is. Empty for no dump."""
    blocks: list[list[str]] = []
    for line in lines:
        text = line.strip()
        if text.endswith("(most recent call first):"):
            blocks.append([text])
        elif blocks and text.startswith("File "):
            blocks[-1].append(text)
    if not blocks:
        return ""
    serving = [b for b in blocks if any(" in worker_main" in f for f in b[1:])]
    current = [b for b in blocks if b[0].startswith("Current thread")]
    chosen = (serving or current or blocks)[0]
    shown = []
    for frame in chosen[1:frames + 1]:
        found = re.match(r'File "(.*)", line (\d+) in (.*)', frame)
        if found:
            path = found.group(1).replace(os.sep, "/").split("/")
            shown.append(f"{'/'.join(path[-2:])}:{found.group(2)} {found.group(3)}")
        else:
            shown.append(frame)
    return " < ".join(shown)


def descendants_of(token: str) -> Iterator[int]:
    """Processes whose environment carries ``POOL_VAR=token``: a pool's workers and whatever
    they started, even in a session of its own (setsid) or after its parent died (reparented
    away from the worker). Linux's /proc only; nothing elsewhere."""
    return carrying(POOL_VAR, token)


def carrying(name: str, value: str) -> Iterator[int]:
    """Processes but this one whose environment sets ``name`` to ``value`` (Linux's /proc;
    nothing elsewhere, nor a process that is not ours to read)."""
    needle = f"{name}={value}".encode()
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                found = needle in f.read().split(b"\0")
        except OSError:  # gone, or not ours to read
            continue
        if found:
            yield pid


def kill_descendants(token: str) -> list[int]:
    """SIGKILL every process of ``descendants_of(token)``; their pids."""
    killed = []
    for pid in descendants_of(token):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except OSError:
            continue
    return killed


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    """``sig`` to a worker still running; one that died meanwhile is left to the next
    command, which reports how it ended."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, sig)
        except ProcessLookupError:
            pass


class Pool:
    """``spec.world`` workers running ``spec.target``; use as a context manager."""

    def __init__(self, spec: WorkerSpec, *, start_timeout: float = 180.0,
                 timeout: float = 300.0, stop_grace: float = STOP_GRACE_S,
                 failed: Callable[[Any], bool] = lambda reply: False,
                 failed_grace: float = FAILED_GRACE_S) -> None:
        self.spec, self.timeout, self.start_timeout = spec, timeout, start_timeout
        self.stop_grace = stop_grace
        # a reply that reports a failure: the other ranks get ``failed_grace`` seconds more,
        # since a rank that failed may leave the others waiting in a collective for ever
        self.failed, self.failed_grace = failed, failed_grace
        self._failed = False  # after a WorkerError the rest are likely stuck in a collective
        self._procs: list[subprocess.Popen[bytes]] = []
        self._conns: list[Connection] = []
        self._tails: list[StderrTail] = []
        self.token = f"{os.getpid()}-{id(self):x}-{time.monotonic_ns():x}"
        self.paused = False

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def __enter__(self) -> Pool:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        self.spawn()
        self.started()

    def spawn(self) -> None:
        """Start the worker processes without waiting for them (``started`` waits): several
        pools can import their frameworks at once. Call it from the thread that will own the
        pool: workers die with the thread that spawned them (PR_SET_PDEATHSIG)."""
        launch = self.spec.launch or Launch.now()
        env = {**_child_env(self.spec, launch), POOL_VAR: self.token}
        for rank in range(self.spec.world):
            parent, child = socket.socketpair()
            cmd = [self.spec.python or sys.executable, "-m", "pytest_mlbench.engine.child",
                   str(child.fileno()), str(rank)]
            cores = self.spec.cores[rank] if rank < len(self.spec.cores) else ()
            if cores:
                cmd.append(",".join(map(str, cores)))
            proc = subprocess.Popen(cmd, env=env, cwd=launch.cwd, pass_fds=(child.fileno(),),
                                    stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    start_new_session=False)
            self._tails.append(StderrTail(proc.stderr))
            child.close()  # the parent keeps one end only, so a dead worker reads as EOF
            conn = Connection(parent.detach())
            conn.send_bytes(pickle.dumps(self.spec))
            self._procs.append(proc)
            self._conns.append(conn)

    def started(self) -> None:
        """Wait until every spawned worker has built its handler."""
        replies = self._gather("start", self.start_timeout)
        wrong = [r for r in replies if r.get("protocol") != PROTOCOL]
        if wrong:
            raise WorkerCrashed(f"worker speaks protocol {wrong[0].get('protocol')}, this "
                                f"pytest-mlbench {PROTOCOL}: the other revision or environment "
                                "has an incompatible pytest-mlbench")

    def call(self, command: str, payload: Any = None, timeout: float | None = None,
             label: str = "") -> list[Any]:
        """Send ``command`` to every worker; their replies in rank order. ``label`` names
        the command in errors (default: the command): ``case round``."""
        return self.call_each(command, [payload] * len(self._conns), timeout, label)

    def call_each(self, command: str, payloads: Sequence[Any],
                  timeout: float | None = None, label: str = "") -> list[Any]:
        """Send ``command`` with a payload per rank; their replies in rank order."""
        self.resume()
        what = label or command
        if not self._conns:
            raise WorkerCrashed(f"the pool of {self.spec.target} is closed: {what!r} has "
                                "no worker to run on")
        for rank, (conn, payload) in enumerate(zip(self._conns, payloads, strict=True)):
            try:
                conn.send((command, payload))
            except (BrokenPipeError, ConnectionError, OSError):
                self._failed = True
                raise WorkerCrashed(self.died(rank, what)) from None
        return self._gather(what, self.timeout if timeout is None else timeout)

    def died(self, rank: int, command: str) -> str:
        """One line: how worker ``rank`` ended, the command it did not answer, its stderr."""
        proc = self._procs[rank]
        try:
            code = proc.wait(2.0)
        except subprocess.TimeoutExpired:
            code = None
        tail = self._tails[rank] if rank < len(self._tails) else None
        text = tail.text() if tail else ""  # waits for the pipe to drain
        said = f"; its last stderr lines: {text}" if text else "; it wrote nothing to stderr"
        # a native crash: where it was, from the dump faulthandler wrote (child.py)
        where = serving_stack(tail.dump) if tail else ""
        crashed = f"; it crashed at {where}" if where else ""
        return (f"worker {rank} (pid {proc.pid}) {exit_text(code)} without answering "
                f"{command!r}{crashed}{said}{hint(code)}")

    def pause(self) -> None:
        """SIGSTOP every worker: nothing of theirs runs until ``resume``."""
        if not self.paused and hasattr(signal, "SIGSTOP"):
            for proc in self._procs:
                _signal(proc, signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.paused:
            for proc in self._procs:
                _signal(proc, signal.SIGCONT)
            self.paused = False

    def _gather(self, command: str, timeout: float) -> list[Any]:
        try:
            return self._gather_all(command, timeout)
        except WorkerError:
            self._failed = True
            raise

    def _gather_all(self, command: str, timeout: float) -> list[Any]:
        replies: dict[int, Any] = {}
        start = time.monotonic()
        deadline = start + timeout
        while len(replies) < len(self._conns):
            pending = [r for r in range(len(self._conns)) if r not in replies]
            ready = wait([self._conns[r] for r in pending], max(deadline - time.monotonic(), 0))
            if not ready:
                raise WorkerTimeout(self._late(command, pending, replies, time.monotonic() - start))
            for rank in pending:
                if self._conns[rank] in ready:
                    replies[rank] = self._reply(rank, command)
                    if self.failed(replies[rank]):
                        deadline = min(deadline, time.monotonic() + self.failed_grace)
        return [replies[r] for r in range(len(self._conns))]

    def _late(self, command: str, pending: list[int], replies: dict[int, Any],
              waited: float) -> str:
        failed = next((r for r, v in replies.items() if self.failed(v)), None)
        why = (f" after worker {failed} reported a failure (left waiting in a collective?): "
               f"{replies[failed]}" if failed is not None else " (hung or deadlocked)")
        pids = ", ".join(str(self._procs[r].pid) for r in pending)
        tails = [t for t in (self._tails[r].text(0.0) for r in pending
                             if r < len(self._tails)) if t]
        said = f"; its last stderr lines: {tails[0]}" if tails else ""
        where = self.stack(pending[0])
        at = f"; it was at {where}" if where else ""
        return (f"worker(s) {pending} of {len(self._conns)} (pid {pids}) did not answer "
                f"{command!r} within {waited:.0f} s{why}{at}; it was killed{said}")

    def stack(self, rank: int) -> str:
        """Where worker ``rank`` is now: it is continued and asked for every thread's stack
        (child.py registers faulthandler for SIGUSR1), and its serving thread's innermost
        frames are returned; empty where it writes none within STACK_WAIT_S."""
        if rank >= len(self._tails) or not hasattr(signal, "SIGUSR1"):
            return ""
        tail, proc = self._tails[rank], self._procs[rank]
        mark = tail.count
        _signal(proc, signal.SIGCONT)
        _signal(proc, signal.SIGUSR1)
        return serving_stack(tail.written_after(mark, STACK_WAIT_S))

    def _reply(self, rank: int, command: str) -> Any:
        conn, proc = self._conns[rank], self._procs[rank]
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            raise WorkerCrashed(self.died(rank, command)) from None
        try:
            message = wire.loads(data)  # the protocol's values only: never runs what it names
        except Exception as exc:  # noqa: BLE001 - a reply this process cannot unpickle
            raise WorkerCrashed(f"worker {rank} (pid {proc.pid}) answered {command!r} with "
                                f"what this process cannot read ({summary(exc)}); return "
                                "NumPy arrays and plain Python values") from None
        if not (isinstance(message, tuple) and len(message) == 2):
            raise WorkerCrashed(f"worker {rank} (pid {proc.pid}) broke the protocol: "
                                f"{type(message).__name__} instead of a reply to {command!r}")
        status, value = message
        if status != "ok":
            raise WorkerCrashed(f"{value} while running {command!r}")
        return value

    def close(self, kill: bool = False) -> None:
        """Stop every worker; never returns with one still running. ``kill`` skips the polite
        stop: for workers whose work is done and that keep nothing (an interpreter that tears
        down torch and TensorFlow spends ~0.6 s of CPU on it; SIGKILL costs nothing)."""
        if kill:
            for proc in self._procs:
                if proc.poll() is None:
                    proc.kill()
        self.resume()
        for conn in self._conns:
            try:
                conn.send(("stop", None))
            except (BrokenPipeError, OSError):
                pass  # already dead: terminate/wait below still collects it
        deadline = time.monotonic() + (0.0 if self._failed or kill else self.stop_grace)
        for proc in self._procs:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                pass
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(2.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for conn in self._conns:
            conn.close()
        if self._procs:  # what the workers started, even in a session of its own
            kill_descendants(self.token)
        self._procs, self._conns, self._tails, self.paused = [], [], [], False
