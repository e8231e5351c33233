"""``python -m pytest_mlbench.engine.child FD RANK [CORES]``: one worker process.

Reads its WorkerSpec from the socket it inherited as file descriptor FD, restricts itself to
CORES (a comma list) before anything starts a thread pool, applies nothing else itself (the
launcher already put the spec's environment in place) and serves commands (launcher.worker_main).

A worker never outlives the session that started it: on Linux it asks the kernel for SIGKILL
when its parent dies (PR_SET_PDEATHSIG), which also ends a worker the campaign had stopped
(SIGSTOP) when the session was killed; a stopped worker cannot see its socket close.

On SIGUSR1 it writes every thread's Python stack to stderr (faulthandler, which works while a
thread holds the GIL in native code): the parent asks a worker that did not answer in time
where it is before killing it. Where MLBENCH_STACKS names a folder, SIGUSR2 writes the same to
a file of that folder named after the worker's pid: tools/gpu_check.sh asks every worker so as
it cuts a session (pytest's capture would swallow what the workers write to stderr then).
A native crash writes the same as it happens, which the parent's one line about the crash
quotes (launcher.Pool.died).
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import pickle
import signal
import sys
from multiprocessing.connection import Connection

PR_SET_PDEATHSIG = 1
STACKS_VAR = "MLBENCH_STACKS"  # a folder: SIGUSR2 writes every thread's stack to PID.txt there
_stack_file = None  # kept open for faulthandler, which writes to its descriptor


def answer_stack_requests() -> None:
    """SIGUSR1: every thread's stack to stderr; SIGUSR2: to MLBENCH_STACKS/PID.txt, if set."""
    global _stack_file
    if not hasattr(signal, "SIGUSR1"):
        return
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    # and where a native crash (SIGSEGV, SIGABRT, ...) found each thread, for its one line
    faulthandler.enable(file=sys.stderr, all_threads=True)
    folder = os.environ.get(STACKS_VAR)
    if folder and os.path.isdir(folder):
        _stack_file = open(os.path.join(folder, f"{os.getpid()}.txt"), "w")  # noqa: SIM115
        faulthandler.register(signal.SIGUSR2, file=_stack_file, all_threads=True)


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
    answer_stack_requests()
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
