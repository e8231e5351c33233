"""``python -m pytest_mlbench.engine.child FD RANK [CORES]``: one worker process.

Reads its WorkerSpec from the socket it inherited as file descriptor FD, restricts itself to
CORES (a comma list) before anything starts a thread pool, applies nothing else itself (the
launcher already put the spec's environment in place) and serves commands (launcher.worker_main).

A worker never outlives the session that started it: on Linux it asks the kernel for SIGKILL
when its parent dies (PR_SET_PDEATHSIG), which also ends a worker the campaign had stopped
(SIGSTOP) when the session was killed; a stopped worker cannot see its socket close.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import sys
from multiprocessing.connection import Connection

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """SIGKILL when the process (the thread) that started this one ends; Linux only."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return


def main(argv: list[str]) -> None:
    die_with_parent()
    fd, rank = int(argv[0]), int(argv[1])
    if len(argv) > 2 and hasattr(os, "sched_setaffinity"):
        # before numpy and the frameworks size their thread pools from the affinity mask
        os.sched_setaffinity(0, {int(c) for c in argv[2].split(",")})
    conn = Connection(fd)
    spec = pickle.loads(conn.recv_bytes())
    from pytest_mlbench.engine.launcher import worker_main

    worker_main(rank, spec, conn)


if __name__ == "__main__":
    main(sys.argv[1:])
