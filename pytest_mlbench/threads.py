"""Equal compute threads for every framework, and where those threads run.

Threads are set three ways, because frameworks read them at different moments: environment
variables before the worker starts (OpenMP, MKL, OpenBLAS, numba, TensorFlow), the worker's
CPU affinity mask (XLA sizes its pool from it), and each framework's own controls once it is
imported (adapters' ``set_threads``). Each adapter reads back what it can and the case fails if
any reads differently. A runtime BLAS thread limit is applied only where a library disagrees:
``openblas_set_num_threads`` slows OpenBLAS's pool even when it sets the count it already has.

Where threads run. A worker starts confined to the case's cores (the first ``threads`` of the
session's, or one per device for a data-parallel case), so that every pool sizes itself from
that mask; each timed turn runs there, and the worker is freed to every core for untimed
work (building, checking, compiling), so that two such jobs run side by side.

Pinning (``--mlbench-affinity=pin``). The threads doing a case's work are found by measurement:
the worker samples every thread's CPU time (/proc) around the case's first warm-up round, and
the ones that used a good share of a core are bound to distinct cores (the calling thread to
the first; when it computes too, as with OpenMP and OpenBLAS, the pool takes the next cores,
and when it only dispatches and waits, as with XLA and TensorFlow, the pool starts on the
first). With the allocator controlled it changed nothing measurable on an idle machine, and a
pinned thread cannot leave a core that something else is busy on, so it is off by default.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence

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


def place(where: Iterable[int]) -> int:
    """Every thread of this process may run on the cores ``where`` and nowhere else; returns
    how many threads were placed. A timed turn places its worker on the case's cores (the
    mask the worker started with, which sized its thread pools) and untimed work frees it to
    every core, so that two untimed jobs can run side by side while nothing is timed."""
    target = set(where)
    placed, seen = 0, set()
    # until no thread is left unplaced: one started meanwhile by a thread not yet placed
    # would keep the old mask, and a timed turn checks that none may leave its cores
    while todo := thread_ids() - seen:
        for tid in todo:
            try:
                os.sched_setaffinity(tid, target)
                placed += 1
            except OSError:  # the thread ended in between
                continue
        seen |= todo
    return placed


def unpin() -> dict[str, object]:
    """Every thread of this process free to run on all of its cores again."""
    available = set(cores())
    for tid in thread_ids():
        try:
            os.sched_setaffinity(tid, available)
        except OSError:
            continue
    return {"pinned": False, "why": "placement left to the OS"}


def count_named(prefixes: Sequence[str]) -> int:
    """Threads whose name starts with one of ``prefixes`` (XLA's pool is ``tf_XLAEigen``)."""
    return sum(1 for name in thread_names().values() if name.startswith(tuple(prefixes)))


def blas_threads() -> dict[str, int]:
    """Threads of every BLAS/OpenMP library loaded in this process, by threadpoolctl."""
    from threadpoolctl import threadpool_info

    return {f"{i['internal_api']}:{os.path.basename(i['filepath'])}": int(i["num_threads"])
            for i in threadpool_info()}


def limit_blas(threads: int) -> object:
    """Hold every loaded BLAS/OpenMP library at ``threads`` (threadpoolctl), only where one
    reports another count: the worker's environment sized them before start, and a runtime
    ``openblas_set_num_threads`` call, even to the count it already has, slows OpenBLAS's pool
    (the NumPy MLP step from about 0.9 ms to 2.2 ms on the 2-core reference machine). Keep
    the returned object alive for as long as the limit should hold (None: nothing to hold)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    if all(int(i["num_threads"]) == threads for i in threadpool_info()):
        return None
    return threadpool_limits(limits=threads)


def summary(found: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(found.items()))
