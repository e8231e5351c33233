"""Data-parallel benchmarks on the frameworks' own engines (issue 5).

launcher.py  worker processes, commands over pipes, crash/hang detection, guaranteed cleanup
jax_dp.py    worker side, JAX: Mesh + NamedSharding, batch sharded, params replicated, jit
torch_dp.py  worker side, PyTorch: DistributedDataParallel over gloo (CPU) or NCCL (GPU)
losses.py    where the engines find a workload's loss (suites/dp/<workload>_<framework>.py)
runner.py    parent side: cases, correctness gate against the float64 reference, timing

Nothing here imports a framework at import time: the engines run in spawned workers.
"""

from __future__ import annotations

from pytest_mlbench.distributed.launcher import (
    Pool,
    WorkerCrashed,
    WorkerError,
    WorkerSpec,
    WorkerTimeout,
)
from pytest_mlbench.distributed.runner import DPCase, enumerate_cases, run_dp_case

__all__ = ["DPCase", "Pool", "WorkerCrashed", "WorkerError", "WorkerSpec", "WorkerTimeout",
           "enumerate_cases", "run_dp_case"]
