"""A pool of long-lived worker processes driven by commands over pipes, with timeouts.

Each worker is a fresh (spawned) interpreter: it applies its environment overrides before
anything imports a framework, builds a handler from ``target`` and then answers commands
until told to stop. The parent sends a command to every worker and waits for every reply,
watching both the pipes and the process sentinels, so a worker that raises, dies or never
answers surfaces as a WorkerError with the worker's own traceback, not as a silent hang.
Closing the pool always ends every worker: stop, then terminate, then kill, each joined.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import socket
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

# seconds a worker gets to leave by itself after "stop" before it is terminated, then killed
STOP_GRACE_S = 5.0


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
class WorkerSpec:
    """What to start: ``target`` is ``"module:function"``, importable in a fresh interpreter,
    returning a Handler; ``env`` is applied before that import (XLA_FLAGS must precede jax)."""

    target: str
    world: int
    config: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it; a tiny race remains until the
    rendezvous binds it, which is the usual trade-off of torch's own tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _resolve(target: str) -> Callable[..., Handler]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _send_error(conn: Connection, rank: int) -> None:
    try:
        conn.send(("error", f"worker {rank} (pid {os.getpid()}):\n{traceback.format_exc()}"))
    except (BrokenPipeError, OSError):  # the parent is gone: nobody is left to tell
        pass


def worker_main(rank: int, spec: WorkerSpec, conn: Connection) -> None:
    """Entry point of one worker process."""
    os.environ.update(spec.env)  # first: frameworks read their flags when they initialise
    handler: Handler | None = None
    try:
        handler = _resolve(spec.target)(rank, spec.world, dict(spec.config))
        conn.send(("ok", os.getpid()))
        while True:
            command, payload = conn.recv()
            if command == "stop":
                break
            conn.send(("ok", handler(command, payload)))
    except BaseException:  # report everything, even SystemExit, then leave with an error code
        _send_error(conn, rank)
        raise SystemExit(1) from None
    finally:
        if handler is not None:
            handler.close()
        conn.close()


class Pool:
    """``world`` workers running ``spec.target``; use as a context manager."""

    def __init__(self, spec: WorkerSpec, *, context: Any = None, start_timeout: float = 180.0,
                 timeout: float = 300.0, stop_grace: float = STOP_GRACE_S) -> None:
        self.spec, self.timeout, self.start_timeout = spec, timeout, start_timeout
        self.stop_grace = stop_grace
        self._failed = False  # after a WorkerError the rest are likely stuck in a collective
        self._ctx = context or multiprocessing.get_context("spawn")
        self._procs: list[Any] = []
        self._conns: list[Connection] = []

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs if p.pid is not None]

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
        for rank in range(self.spec.world):
            parent, child = self._ctx.Pipe(duplex=True)
            proc = self._ctx.Process(target=worker_main, args=(rank, self.spec, child),
                                     name=f"mlbench-worker-{rank}", daemon=True)
            proc.start()
            child.close()  # the parent keeps one end only, so a dead worker reads as EOF
            self._procs.append(proc)
            self._conns.append(parent)
        self._gather("start", self.start_timeout)

    def call(self, command: str, payload: Any = None, timeout: float | None = None) -> list[Any]:
        """Send ``command`` to every worker; their replies in rank order."""
        for conn in self._conns:
            conn.send((command, payload))
        return self._gather(command, self.timeout if timeout is None else timeout)

    def _gather(self, command: str, timeout: float) -> list[Any]:
        try:
            return self._gather_all(command, timeout)
        except WorkerError:
            self._failed = True
            raise

    def _gather_all(self, command: str, timeout: float) -> list[Any]:
        replies: dict[int, Any] = {}
        deadline = time.monotonic() + timeout
        while len(replies) < len(self._conns):
            pending = [r for r in range(len(self._conns)) if r not in replies]
            remaining = deadline - time.monotonic()
            ready = wait([self._conns[r] for r in pending]
                         + [self._procs[r].sentinel for r in pending], max(remaining, 0.0))
            if not ready:
                raise WorkerTimeout(f"worker(s) {pending} of {len(self._conns)} did not answer "
                                    f"{command!r} within {timeout:g} s (hung or deadlocked)")
            for rank in pending:
                if self._conns[rank] in ready or self._procs[rank].sentinel in ready:
                    replies[rank] = self._reply(rank, command)
        return [replies[r] for r in range(len(self._conns))]

    def _reply(self, rank: int, command: str) -> Any:
        conn, proc = self._conns[rank], self._procs[rank]
        try:
            # a dying worker may have sent its traceback just before its sentinel fired
            if not conn.poll(0.5):
                raise EOFError
            status, value = conn.recv()
        except (EOFError, OSError):
            proc.join(1.0)
            raise WorkerCrashed(f"worker {rank} (pid {proc.pid}) exited with code "
                                f"{proc.exitcode} without answering {command!r}") from None
        if status != "ok":
            raise WorkerCrashed(f"{command!r} failed in {value}")
        return value

    def close(self) -> None:
        """Stop every worker; never returns with one still running."""
        for conn in self._conns:
            try:
                conn.send(("stop", None))
            except (BrokenPipeError, OSError):
                pass  # already dead: terminate/join below still collects it
        deadline = time.monotonic() + (0.0 if self._failed else self.stop_grace)
        for proc in self._procs:
            proc.join(max(deadline - time.monotonic(), 0.0))
        for proc in self._procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []
