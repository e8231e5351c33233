"""Equal compute threads for every framework, and where those threads run.

Threads are set three ways, because frameworks read them at different moments: environment
variables before the worker starts (OpenMP, MKL, OpenBLAS, numba, TensorFlow), the worker's
CPU affinity mask (XLA sizes its pool from it), and each framework's own controls once it is
imported (adapters' ``set_threads``). Each adapter reads back what it can and the case fails if
any reads differently.

Pinning. On a shared or virtualised machine the scheduler sometimes parks a framework's
spinning worker thread on the core its caller runs on; the two then time-share one core and a
step takes 1.5x to 50x longer, at random from one process to the next (measured on the 2-core
reference machine: NumPy's MLP step 1.55-1.94 ms unpinned, 0.72-0.74 ms pinned). With
``--mlbench-affinity=pin`` the worker binds its main thread to its first core and spreads the
framework's pool threads over its cores, in the way the pool works:

- ``caller`` pools (OpenMP, OpenBLAS: the calling thread does a share of the work): main thread
  on core 0, pool threads from core 1 on, so no pool thread shares the caller's core while
  there is another;
- ``dispatch`` pools (Eigen in XLA and TensorFlow: the caller only waits): one pool thread per
  core, main thread on core 0.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "NUMBA_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")
TASK_DIR = "/proc/self/task"


def environment(threads: int) -> dict[str, str]:
    """Variables a worker starts with so that every pool is sized ``threads`` from the start."""
    env = {var: str(threads) for var in THREAD_VARS}
    # inter-op parallelism runs independent ops side by side; with intra-op at ``threads`` it
    # would oversubscribe the cores, and torch's equivalent is set to 1 too (adapters)
    env["TF_NUM_INTEROP_THREADS"] = "1"
    # inductor compiles in this process rather than in a pool of compile workers, which would
    # otherwise stay alive next to the timed work
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    return env


def cores() -> list[int]:
    """The cores this process may run on, in order."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def thread_ids() -> set[int]:
    """Native ids of this process's threads (Linux); empty where the OS does not say."""
    try:
        return {int(t) for t in os.listdir(TASK_DIR)}
    except OSError:
        return set()


def thread_names() -> dict[int, str]:
    out = {}
    for tid in thread_ids():
        try:
            with open(f"{TASK_DIR}/{tid}/comm") as fh:
                out[tid] = fh.read().strip()
        except OSError:
            continue
    return out


def _bind(tid: int, core: int) -> bool:
    try:
        os.sched_setaffinity(tid, {core})
        return True
    except OSError:  # the thread ended in between
        return False


def pin(style: str, known: set[int], pool_names: Sequence[str] = ()) -> dict[str, object]:
    """Bind this process's threads for a ``style`` pool (see the module docstring).
    ``known`` are the threads that existed before the framework started (left alone, except
    the main thread). Returns what was done, for the record."""
    available = cores()
    if not hasattr(os, "sched_setaffinity") or len(available) < 1:
        return {"pinned": False, "why": "this OS does not let a process pin its threads"}
    main = threading.get_native_id()
    names = thread_names()
    new = sorted(t for t in names if t not in known and t != main)
    _bind(main, available[0])
    if style == "dispatch":
        pool = [t for t in new if names[t].startswith(tuple(pool_names))] if pool_names else new
        placed = {t: available[i % len(available)] for i, t in enumerate(pool)}
    else:
        order = available[1:] + available[:1]
        placed = {t: order[i % len(order)] for i, t in enumerate(new)}
    bound = {t: c for t, c in placed.items() if _bind(t, c)}
    return {"pinned": True, "style": style, "main_core": available[0],
            "pool_threads": len(bound)}


def count_named(prefixes: Sequence[str]) -> int:
    """Threads whose name starts with one of ``prefixes`` (XLA's pool is ``tf_XLAEigen``)."""
    return sum(1 for name in thread_names().values() if name.startswith(tuple(prefixes)))


def blas_threads() -> dict[str, int]:
    """Threads of every BLAS/OpenMP library loaded in this process, by threadpoolctl."""
    from threadpoolctl import threadpool_info

    return {f"{i['internal_api']}:{os.path.basename(i['filepath'])}": int(i["num_threads"])
            for i in threadpool_info()}


def limit_blas(threads: int) -> object:
    """Hold every loaded BLAS/OpenMP library at ``threads`` (threadpoolctl); keep the returned
    object alive for as long as the limit should hold."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=threads)


def summary(found: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(found.items()))
