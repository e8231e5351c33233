"""A framework worker: one fresh process, one framework, many cases served one at a time.

Started by the launcher as ``pytest_mlbench.engine.framework_worker:build``. At start it sets the
framework's threads and checks them, warms the framework up (so one-time start-up costs do
not land in the first case's compile time), then serves (pinning, when asked, the threads that
do each case's work, found on its first warm-up round):

    info                        versions, threads, pinning
    open <case spec>            build a case -> handle
    case <handle> <command>     a CaseServer command (start, evaluate, steps, round, finish, ...),
                                or ``learn``: a warm-up round, repeated while the worker watches
                                which threads work, then pins them
    close <handle>              drop a case and collect its memory
    peak <dtype>                this framework's best matmul GFLOP/s at a dtype

An exception inside a case command is returned as that case's failure, not raised: the worker
keeps serving. Skips (a device or dtype the framework lacks) come back as skips.
"""

from __future__ import annotations

import gc
import time
import traceback
from typing import Any

from pytest_mlbench import frameworks
from pytest_mlbench import threads as threading_
from pytest_mlbench.engine.server import CaseServer
from pytest_mlbench.errors import Unavailable, Unsupported

PEAK_N = {"float64": 1024, "float32": 1536, "bfloat16": 1024}  # large enough for the peak
PEAK_REPEATS = 3  # in every process; the session keeps the best of all
LEARN_S = 0.1  # how long a case's first warm-up round repeats while its threads are watched


def release(cases: dict[int, Any], handle: int | None) -> None:
    """Drop a case and collect the garbage it leaves (compiled functions and graphs hold
    cycles), so the next case starts on a clean heap. A full collection walks every tracked
    object, and a framework has hundreds of thousands (TensorFlow ~350,000, torch ~510,000 once
    inductor is imported): 0.2-0.3 s a case. So, with no case left open, whatever survived is
    the process's own long-lived state (modules, runtimes, compile caches) and is frozen out of
    later collections (gc.freeze), which then walk only what later cases made. Never with a case
    open: a frozen case could not be collected when it closes."""
    if handle is not None:
        cases.pop(handle, None)
    gc.collect()
    if not cases:
        gc.freeze()


class FrameworkWorker:
    def __init__(self, rank: int, world: int, config: dict[str, Any]) -> None:
        self.rank, self.world, self.config = rank, world, config
        self.adapter = frameworks.load(config["framework"], config["registry"])
        self.adapter.set_threads(config["threads"])
        self.cases: dict[int, CaseServer] = {}
        self.pinned: dict[str, Any] = {"pinned": False, "why": "affinity off"}
        self.compiler_start_s: float | None = None
        # the cores the launcher started this process on (its pools sized themselves from
        # them): timed turns run there; untimed work may use every core of the session
        self.timed_cores = threading_.cores()
        self.free_cores = list(config.get("free_cores") or self.timed_cores)
        # with affinity off, threads move to every core between timed turns; pinned, they stay
        self.moves = config.get("affinity", "off") == "off"
        self.on_timed = False  # placed on the timed cores by a turn's rounds, not yet freed
        self._warm_up(bool(config.get("compiler", True)))
        release(self.cases, None)  # the framework's own objects, out of every later collection
        if self.moves:
            threading_.place(self.free_cores)

    def _warm_up(self, compiler_too: bool) -> None:
        """One small matmul starts the framework's runtime and thread pools, and a trivial
        compilation its compiler (inductor's first build takes ~10 s here): one-time costs of
        a process, recorded as such, not in the first case's compile time. A pool that serves
        no compiled case (torch's data-parallel ranks run eager), or serves a session that
        reports no compile time (nothing timed), skips the compiler."""
        self.adapter.matmul_gflops("float32", 64, 1)
        compiler = getattr(self.adapter, "warm_up_compiler", None)
        if compiler_too and callable(compiler):
            start = time.perf_counter()
            compiler()
            self.compiler_start_s = time.perf_counter() - start

    def learn_and_pin(self, run: Any, pin: bool, again: Any = None) -> Any:
        """Run a case's first warm-up round (then it, or ``again``, repeated for at least
        LEARN_S), see which threads did the work, and pin those (or, with ``pin`` off, free
        every thread)."""
        before, start = threading_.cpu_seconds(), time.perf_counter()
        reply = run()
        while time.perf_counter() - start < LEARN_S:
            if again is None:
                reply = run()
            else:
                again()
        busy = threading_.busy_threads(before, threading_.cpu_seconds(),
                                       time.perf_counter() - start)
        self.pinned = threading_.pin(busy) if pin else threading_.unpin()
        return reply

    def _on_timed_cores(self, call: Any) -> Any:
        """A timed turn runs on the case's cores, as every other case's turns do (the turn's
        first round, dropped, absorbs the move). A turn is one command a round, so the worker
        stays there until its next command that is not a round (the turn's fetch), which
        frees it again (``_off_timed_cores``)."""
        if not self.on_timed:
            threading_.place(self.timed_cores)
            self.on_timed = True
        return call()

    def _off_timed_cores(self) -> None:
        if self.on_timed:
            self.on_timed = False
            if self.moves:
                threading_.place(self.free_cores)

    def __call__(self, command: str, payload: Any) -> Any:
        if not (command == "case" and payload[1] == "round"):
            self._off_timed_cores()
        if command == "ping":
            return None
        if command == "info":
            return {"threads": self.adapter.threads(), "versions": self.adapter.versions(),
                    "pinned": self.pinned, "compiler_start_s": self.compiler_start_s}
        if command == "open":
            return self._guarded(lambda: self._open(payload))
        if command == "case":
            handle, method, args = payload
            call = lambda: getattr(self.cases[handle], method)(*args)  # noqa: E731
            if method == "learn":  # a first warm-up round: the threads it busies get pinned
                pin, *rest = args
                call = lambda: self.learn_and_pin(  # noqa: E731
                    lambda: self.cases[handle].round(*rest), bool(pin),
                    self.cases[handle].rehearsal())
            elif method == "round" and not self.pinned.get("pinned"):
                return self._guarded(lambda: self._on_timed_cores(call))
            return self._guarded(call)
        if command == "close":
            release(self.cases, payload)
            return None
        if command == "peak":
            return self.adapter.matmul_gflops(payload, PEAK_N.get(payload, 1024), PEAK_REPEATS)
        raise ValueError(f"unknown command {command!r}")

    def _open(self, spec: dict[str, Any]) -> int:
        handle = len(self.cases) and max(self.cases) + 1
        self.cases[handle] = CaseServer(self.adapter, spec, self.rank, self.config.get("dp"))
        return handle

    @staticmethod
    def _guarded(fn: Any) -> dict[str, Any]:
        """The command's value, or what went wrong in the case, as data."""
        try:
            return {"ok": fn()}
        except (Unavailable, Unsupported) as exc:
            return {"skip": str(exc)}
        except AssertionError as exc:
            return {"fail": str(exc)}
        except Exception as exc:  # the implementation's own error: its traceback is the report
            return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}

    def close(self) -> None:
        self.cases.clear()


def build(rank: int, world: int, config: dict[str, Any]) -> FrameworkWorker:
    return FrameworkWorker(rank, world, config)
