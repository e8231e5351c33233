"""Worker handlers that misbehave on purpose, for testing the launcher's crash and hang
detection. They live in the package so a spawned interpreter can import them by name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any


class Forged:
    """A reply that runs code where it is unpickled: ``exec`` of ``source`` (as a cheating
    implementation could send through its worker's pipe to rewrite the parent's judge)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return exec, (self.source,)


class Faulty:
    """Echoes payloads (``environment`` answers with the named variables and the working
    folder); on ``fault_rank`` it raises or sleeps forever when ``fault_at``
    (``setup`` or a command name) comes, or exits hard on ``exit``, as ``config`` asks."""

    def __init__(self, rank: int, world: int, config: dict[str, Any]) -> None:
        self.rank, self.config = rank, config
        self._maybe_fail("setup")

    def _maybe_fail(self, when: str) -> None:
        if self.rank != self.config.get("fault_rank") or when != self.config.get("fault_at"):
            return
        kind = self.config.get("fault", "raise")
        if kind == "raise":
            raise ValueError(f"deliberate failure in rank {self.rank} at {when}")
        if kind == "exit":
            os._exit(3)  # no traceback, no goodbye: as a segfaulting extension would leave
        if kind == "exit0":
            os._exit(0)
        if kind == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        if kind == "interrupt":
            raise KeyboardInterrupt
        if kind == "stderr":  # as XLA does with a flag it does not know
            sys.stderr.write("noise\nF external/xla/parse_flags.cc:1: Unknown flag in "
                             "XLA_FLAGS: --xla_garbage\n")
            sys.stderr.flush()
            os.abort()
        while True:  # "hang": deaf to the pipe, as a deadlocked collective would be
            time.sleep(3600)

    def __call__(self, command: str, payload: Any) -> Any:
        self._maybe_fail(command)
        if command == "stdout":  # junk on stdout and a raw write to fd 1: not the protocol
            print("garbage " * 50, flush=True)
            os.write(1, b"\x00\x01\x80junk\n")
            return "still talking"
        if command == "spawn":  # a child in a session of its own, as a build() might start
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                     start_new_session=True)
            return child.pid
        if command == "forged":  # payload: what the reply would run in the parent
            return {"loss": 0.0, "grads": Forged(payload)}
        if command == "environment":  # what the worker started from: variables and folder
            return {**{name: os.environ.get(name, "") for name in payload}, "cwd": os.getcwd()}
        return {"rank": self.rank, "pid": os.getpid(), "payload": payload}

    def close(self) -> None:
        pass


def faulty(rank: int, world: int, config: dict[str, Any]) -> Faulty:
    return Faulty(rank, world, config)
