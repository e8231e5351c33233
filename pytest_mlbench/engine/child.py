"""``python -m pytest_mlbench.engine.child FD RANK [CORES]``: one worker process.

Reads its WorkerSpec from the socket it inherited as file descriptor FD, restricts itself to
CORES (a comma list) before anything starts a thread pool, applies nothing else itself (the
launcher already put the spec's environment in place) and serves commands (launcher.worker_main).
"""

from __future__ import annotations

import os
import pickle
import sys
from multiprocessing.connection import Connection


def main(argv: list[str]) -> None:
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
