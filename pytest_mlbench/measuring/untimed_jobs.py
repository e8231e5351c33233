"""Untimed work, several jobs at once: nothing is being timed, so the cores may be shared.

A campaign's work is mostly untimed: starting workers, building cases, compiling them,
checking them against the reference, auditing timed rounds afterwards. Only the timed turns
must run alone. ``UntimedJobs.run`` runs a batch of such jobs on up to ``width`` threads of
the parent (one per core), never two jobs on the same key at once: a key is a worker pool,
which answers one command at a time. A job may name several keys (equivalent pools: a session
that times nothing may keep a pool per framework and core) and runs on its first if it is
free, on a later one only when no other job can use a free thread on its own first key.
The batch ends before anything is timed again.

A job handles its own failures (the campaign records them against its case); an exception
that escapes a job is re-raised once the batch has stopped. Ctrl-C in the session's thread
calls ``interrupt`` (the campaign kills its workers, so a job blocked on one returns), waits
for the running jobs and re-raises.

The threads live until ``close``, for the whole campaign, not for one batch: a worker process
dies with the thread that started it (PR_SET_PDEATHSIG, launcher.py), and a job may start
one (a pool that died and is started again, the oracle's first call).
"""

from __future__ import annotations

import concurrent.futures as futures
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

POLL_S = 0.2  # how often the session's thread looks up from waiting (Ctrl-C lands here)


@dataclass(frozen=True)
class Job:
    keys: tuple[Hashable, ...]  # it runs on one of these; never two jobs on one key at once
    run: Callable[[Hashable], None]  # called with the key it runs on


class UntimedJobs:
    def __init__(self, width: int, interrupt: Callable[[], None] = lambda: None) -> None:
        self.width = max(1, width)
        self.interrupt = interrupt
        self._executor: futures.ThreadPoolExecutor | None = None

    def run(self, jobs: Sequence[Job]) -> None:
        if self.width == 1 or len(jobs) < 2:
            for job in jobs:
                job.run(job.keys[0])
            return
        if self._executor is None:
            self._executor = futures.ThreadPoolExecutor(self.width,
                                                        thread_name_prefix="mlbench-untimed")
        self._dispatch(self._executor, list(jobs))

    def close(self) -> None:
        """End the threads (after the workers they may have started are closed)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _dispatch(self, ex: futures.ThreadPoolExecutor, pending: list[Job]) -> None:
        running: dict[futures.Future[None], Hashable] = {}
        errors: list[BaseException] = []
        try:
            while pending or running:
                self._start(ex, pending, running)
                done, _ = futures.wait(running, POLL_S, futures.FIRST_COMPLETED)
                for future in done:
                    del running[future]
                    if future.exception() is not None:
                        errors.append(future.exception())  # type: ignore[arg-type]
                if errors:
                    pending.clear()  # let the running jobs end, start no more
        except BaseException:  # Ctrl-C: end the workers, so that running jobs return
            self.interrupt()
            futures.wait(running)
            raise
        if errors:
            raise errors[0]

    def _start(self, ex: futures.ThreadPoolExecutor, pending: list[Job],
               running: dict[futures.Future[None], Hashable]) -> None:
        """Start pending jobs while a thread is free: first those whose first key is free,
        then any with a free key. A job's later keys are spares (a second pool of the same
        framework, started only when first used): a free thread goes to another key's job
        before it opens a spare. Jobs that name the same keys start in the order given."""
        busy = set(running.values())
        for first_only in (True, False):
            for job in list(pending):
                if len(running) >= self.width:
                    return
                keys = job.keys[:1] if first_only else job.keys
                key = next((k for k in keys if k not in busy), None)
                if key is None:
                    continue
                pending.remove(job)
                busy.add(key)
                running[ex.submit(job.run, key)] = key
