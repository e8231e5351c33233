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
threads that did a case's work over its cores. Which threads those are is measured, not
guessed from names: the worker samples every thread's CPU time (/proc) around the case's
warm-up rounds, and the ones that used a good share of a core are the pool:

- when the calling thread computes a share itself (OpenMP, OpenBLAS), it keeps the first core
  and the pool threads take the next ones, so no pool thread shares the caller's core while
  there is another;
- when the calling thread only dispatches and waits (XLA's and TensorFlow's Eigen pools), the
  pool threads take one core each from the first.
"""

from __future__ import annotations

import os
import threading
import time
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


def _process_cores() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


# The cores this process may use, read once at import (a worker imports this module after its
# launcher restricted it, before anything is pinned). Read later, sched_getaffinity(0) would
# be the calling thread's own mask: after pinning, the main thread's single core.
_CORES = _process_cores()


def cores() -> list[int]:
    """The cores this process may run on, in order."""
    return list(_CORES)


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


def cpu_seconds() -> dict[int, float]:
    """CPU time (user + system) each thread of this process has used, from /proc."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out = {}
    for tid in thread_ids():
        try:
            with open(f"{TASK_DIR}/{tid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[tid] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return out


def busy_threads(before: Mapping[int, float], after: Mapping[int, float], wall: float,
                 share: float = 0.15) -> dict[int, float]:
    """Threads that used at least ``share`` of a core over ``wall`` seconds: the ones doing
    the work, whatever the framework calls them; by share of the wall time, busiest first."""
    used = {t: after[t] - before.get(t, 0.0) for t in after}
    busy = {t: u / wall for t, u in used.items() if wall > 0 and u / wall >= share}
    return dict(sorted(busy.items(), key=lambda kv: -kv[1]))


def pin(busy: Mapping[int, float]) -> dict[str, object]:
    """Bind the threads that do a case's work to distinct cores: the main thread to the
    first core and the other busy threads, busiest first, to the following ones (wrapping).
    When the main thread only dispatches and waits (XLA, TensorFlow: it used under half a
    core), the pool threads start on the first core instead, one per core."""
    available = cores()
    if not hasattr(os, "sched_setaffinity") or not busy:
        return {"pinned": False, "why": "no thread was busy enough to place, or no affinity "
                                        "support on this OS"}
    main = threading.get_native_id()
    _bind(main, available[0])
    pool = [t for t in busy if t != main]
    start = 1 if busy.get(main, 0.0) >= 0.5 else 0
    order = available[start:] + available[:start]
    bound = [t for i, t in enumerate(pool) if _bind(t, order[i % len(order)])]
    return {"pinned": True, "main_core": available[0], "pool_threads": len(bound),
            "main_busy": round(busy.get(main, 0.0), 2)}


def unpin() -> dict[str, object]:
    """Every thread of this process free to run on all of its cores again."""
    available = set(cores())
    for tid in thread_ids():
        try:
            os.sched_setaffinity(tid, available)
        except OSError:
            continue
    return {"pinned": False, "why": "placement left to the OS"}


def core_load(cores_: Sequence[int], seconds: float = 0.25) -> dict[int, float]:
    """How busy each of ``cores_`` is, 0 to 1, over ``seconds`` (from /proc/stat); the caller
    sleeps meanwhile, so on a machine whose workers are all stopped this is foreign load."""
    def sample() -> dict[int, tuple[int, int]]:
        out = {}
        try:
            with open("/proc/stat") as fh:
                for line in fh:
                    name, *fields = line.split()
                    if name.startswith("cpu") and name[3:].isdigit():
                        values = [int(v) for v in fields]
                        idle = values[3] + (values[4] if len(values) > 4 else 0)
                        out[int(name[3:])] = (sum(values), idle)
        except OSError:
            pass
        return out

    before = sample()
    time.sleep(seconds)
    after = sample()
    load = {}
    for core in cores_:
        if core in before and core in after:
            total = after[core][0] - before[core][0]
            idle = after[core][1] - before[core][1]
            load[core] = 1 - idle / total if total > 0 else 0.0
    return load


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
