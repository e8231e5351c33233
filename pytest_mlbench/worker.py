"""``python -m pytest_mlbench.worker --connect HOST:PORT --token-file F``: a worker that a
cluster launcher (torchrun, srun, mpirun) starts, once per rank, and that connects to a
session (engine/remote_worker.py; docs/DISTRIBUTED.md)."""

from __future__ import annotations

import sys

from pytest_mlbench.engine.remote_worker import main

if __name__ == "__main__":
    sys.exit(main())
