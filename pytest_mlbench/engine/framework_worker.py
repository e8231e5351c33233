"""A framework worker: one fresh process, one framework, many cases served one at a time.

Started by the launcher as ``pytest_mlbench.engine.framework_worker:build``. At start it sets the
framework's threads and checks them, warms the framework up (so one-time start-up costs do
not land in the first case's compile time), then serves the commands of engine/protocol.py,
each by its handler in COMMANDS (a case's commands by theirs in CASE_COMMANDS):

    Info                        versions, threads, pinning
    Open(spec)                  build a case -> its handle
    OnCase(handle, command)     a CaseServer command (Start, Evaluate, Steps, Round, Fetch,
                                Finish, ...), or ``Learn``: a warm-up round, repeated while the
                                worker watches which threads work, then pins them; the
                                Round that ends a turn also says what the turn used and
                                what the worker holds (engine/usage.py)
    Close(handle)               drop a case and collect its memory
    Peak(dtype)                 this framework's best matmul GFLOP/s at a dtype

An exception inside a case command is returned as that case's failure (protocol.Failed,
Raised), not raised: the worker keeps serving. Skips (a device or dtype the framework lacks,
or an instruction set the host's CPU lacks: engine/hostlimits.py) come back as
protocol.Skipped.
"""

from __future__ import annotations

import gc
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from pytest_mlbench import frameworks
from pytest_mlbench import threads as threading_
from pytest_mlbench.engine import hostlimits, usage
from pytest_mlbench.engine import protocol as p
from pytest_mlbench.engine.server import CaseServer
from pytest_mlbench.errors import Unavailable, Unsupported

PEAK_N = {"float64": 1024, "float32": 1536, "bfloat16": 1024}  # large enough for the peak
# on a GPU: 1024^2 at bfloat16 is microseconds there, launch-bound (an H100's dense bfloat16
# is 989 TFLOP/s); 8192^2 is 1.1 TFLOP, milliseconds at any dtype
PEAK_N_GPU = 8192
PEAK_REPEATS = 3  # in every process; the session keeps the best of all
LEARN_S = 0.1  # how long a case's first warm-up round repeats while its threads are watched
LEARN_RANK_ROUNDS = 5  # the same on every rank of a data-parallel pool (not a time)
T = TypeVar("T")


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
        join = getattr(self.adapter, "join_at_start", None)
        parallel = config.get("dp") or {}
        if parallel.get("workers", 1) > 1 and callable(join):  # before the runtime starts
            join(rank, world, parallel)
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
        warm = config.get("compiler", "cpu")  # the device the pool's compiled cases run on
        self._warm_up("cpu" if warm is True else str(warm or ""))
        release(self.cases, None)  # the framework's own objects, out of every later collection
        # the thread controls as the session set them, and their setters watched from here
        # on (before any implementation imports one): what every turn is read against
        self.setting = usage.setting(config["framework"], config["threads"], self.timed_cores)
        self.turns: dict[int, usage.Turn] = {}  # by case (id of its CaseServer)
        if self.moves:
            threading_.place(self.free_cores)

    def _warm_up(self, device: str) -> None:
        """One small matmul starts the framework's runtime and thread pools, and a trivial
        compilation on ``device`` its compiler there (inductor's C++ toolchain on the CPU,
        Triton on a GPU; a cold first C++ build takes 10-45 s on a 2-core host): one-time
        costs of a process, recorded as such, not in the first case's compile time. A pool
        that serves no compiled case (torch's data-parallel ranks run eager), or serves a
        session that reports no compile time (nothing timed), skips the compiler (``""``)."""
        self.adapter.matmul_gflops("float32", 64, 1)
        compiler = getattr(self.adapter, "warm_up_compiler", None)
        if device and callable(compiler):
            start = time.perf_counter()
            compiler(device)
            self.compiler_start_s = time.perf_counter() - start

    def learn_and_pin(self, run: Callable[[], T], pin: bool,
                      again: Callable[[], Any] | None = None) -> T:
        """Run a case's first warm-up round (then it, or ``again``, repeated for at least
        LEARN_S), see which threads did the work, and pin those (or, with ``pin`` off, free
        every thread). The ranks of a data-parallel pool (world > 1) repeat it
        LEARN_RANK_ROUNDS times each instead: their rounds meet in collectives, and a rank
        that stopped by its own clock a round before another left that one waiting in a
        collective until the command's timeout."""
        before, start = threading_.cpu_seconds(), time.perf_counter()
        reply = run()

        def repeat() -> None:
            nonlocal reply
            if again is None:
                reply = run()
            else:
                again()

        if self.world > 1:  # every rank the same count (see above)
            for _ in range(LEARN_RANK_ROUNDS - 1):
                repeat()
        while self.world == 1 and time.perf_counter() - start < LEARN_S:
            repeat()
        busy = threading_.busy_threads(before, threading_.cpu_seconds(),
                                       time.perf_counter() - start)
        self.pinned = threading_.pin(busy) if pin else threading_.unpin()
        return reply

    def _on_timed_cores(self, call: Callable[[], T]) -> T:
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

    def __call__(self, name: str, command: p.Command) -> Any:
        """The launcher's entry: ``command`` is one of protocol's commands (``name`` is its
        name, for the launcher's messages)."""
        handler = COMMANDS.get(type(command))
        if handler is None:
            raise ValueError(f"unknown command {name!r} ({type(command).__name__}): this worker "
                             f"serves {sorted(c.name for c in COMMANDS)}")
        if not (isinstance(command, p.OnCase)
                and isinstance(command.command, p.Round | p.BareLoop)):
            self._off_timed_cores()  # a turn's rounds are over: its fetch, or anything else
        return handler(self, command)

    # -- the commands ---------------------------------------------------------------------------

    def ping(self, command: p.Ping) -> p.Done:
        return p.Done()

    def info(self, command: p.Info) -> p.WorkerInfo:
        return p.WorkerInfo(threads=self.adapter.threads(), versions=self.adapter.versions(),
                            pinned=self.pinned, compiler_start_s=self.compiler_start_s)

    def open(self, command: p.Open) -> p.Outcome:
        return self._guarded(lambda: p.Opened(self._open(command.spec)), command.spec)

    def on_case(self, command: p.OnCase) -> p.Outcome:
        handler = CASE_COMMANDS.get(type(command.command))
        if handler is None:
            raise ValueError(f"unknown case command {type(command.command).__name__}: a case "
                             f"serves {sorted(c.name for c in CASE_COMMANDS)}")
        spec = self.cases[command.handle].spec if command.handle in self.cases else None
        return self._guarded(lambda: handler(self, self.cases[command.handle], command.command),
                             spec)

    def close_case(self, command: p.Close) -> p.Done:
        case = self.cases.get(command.handle)
        if case is not None:
            self.turns.pop(id(case), None)
        release(self.cases, command.handle)
        return p.Done()

    def peak(self, command: p.Peak) -> p.PeakFound:
        on_gpu = any(case.spec.device == "gpu" for case in self.cases.values())
        n = PEAK_N_GPU if on_gpu else PEAK_N.get(command.dtype, 1024)
        return p.PeakFound(self.adapter.matmul_gflops(command.dtype, n, PEAK_REPEATS))

    # -- a case's commands that the worker does more than pass on -------------------------------

    def round(self, case: CaseServer, command: p.Round) -> p.RoundRan:
        if self.pinned.get("pinned"):
            return self._turn_round(case, command)
        return self._on_timed_cores(lambda: self._turn_round(case, command))

    def _turn_round(self, case: CaseServer, command: p.Round) -> p.RoundRan:
        """A turn's first round (one that does not follow) begins the turn's reading of
        child processes and threads (usage.Turn), on the case's cores, before its clock;
        the round that ``ends`` the turn reads what it used after its clock, still there,
        and sends it with the reply (no message of its own: a message costs more than the
        reading, milliseconds on a loaded host)."""
        turn = self.turns.setdefault(id(case), usage.Turn())
        began = time.perf_counter()
        if not command.follows:
            turn.begin()
        read_s = time.perf_counter() - began
        ran = run_round(case, command)
        if not command.ends:
            return replace(ran, usage_s=ran.usage_s + read_s)
        began = time.perf_counter()
        used = turn.end(self.setting)
        return replace(ran, usage=used,
                       usage_s=ran.usage_s + read_s + time.perf_counter() - began)

    def bare_loop(self, case: CaseServer, command: p.BareLoop) -> p.Seconds:
        """On the timed cores, as a round is."""
        if self.pinned.get("pinned"):
            return case.bare_loop(command.keys)
        return self._on_timed_cores(lambda: case.bare_loop(command.keys))

    def learn(self, case: CaseServer, command: p.Learn) -> p.RoundRan:
        """A first warm-up round: the threads it busies get pinned (training repeats a loss
        and gradient after it, not the round: CaseServer.rehearsal)."""
        return self.learn_and_pin(lambda: run_round(case, command.round), command.pin,
                                  case.rehearsal())

    def _open(self, spec: p.CaseSpec) -> int:
        handle = len(self.cases) and max(self.cases) + 1
        self.cases[handle] = CaseServer(self.adapter, spec, self.rank, self.config.get("dp"))
        return handle

    @staticmethod
    def _guarded(fn: Callable[[], Any], spec: p.CaseSpec | None = None) -> p.Outcome:
        """The command's reply, or what went wrong in the case (``spec``), as data."""
        try:
            return p.Ok(fn())
        except (Unavailable, Unsupported) as exc:
            return p.Skipped(str(exc))
        except AssertionError as exc:
            return p.Failed(str(exc))
        except Exception as exc:  # the implementation's own error: its traceback is the report
            lacks = hostlimits.host_lacks(exc, spec)  # unless the host lacks the means
            if lacks is not None:
                return p.Skipped(lacks)
            return p.Raised(f"{type(exc).__name__}: {exc}", traceback.format_exc())

    def close(self) -> None:
        self.cases.clear()


def run_round(case: CaseServer, command: p.Round) -> p.RoundRan:
    """The one place a Round's fields reach CaseServer.round (Round and Learn both)."""
    return case.round(command.calls, command.keys, command.follows)


def build(rank: int, world: int, config: dict[str, Any]) -> FrameworkWorker:
    return FrameworkWorker(rank, world, config)


# command type -> its handler (a new command: its dataclass in protocol.py, a line here)
COMMANDS: dict[type[p.Command], Callable[[FrameworkWorker, Any], Any]] = {
    p.Ping: FrameworkWorker.ping,
    p.Info: FrameworkWorker.info,
    p.Open: FrameworkWorker.open,
    p.OnCase: FrameworkWorker.on_case,
    p.Close: FrameworkWorker.close_case,
    p.Peak: FrameworkWorker.peak,
}


def _start(w: FrameworkWorker, case: CaseServer, c: p.Start) -> p.Started:
    return case.start()


def _evaluate(w: FrameworkWorker, case: CaseServer, c: p.Evaluate) -> p.Evaluation:
    return case.evaluate(c.index)


def _steps(w: FrameworkWorker, case: CaseServer, c: p.Steps) -> p.Stepped:
    return case.steps(c.n)


def _fetch(w: FrameworkWorker, case: CaseServer, c: p.Fetch) -> p.Fetched:
    return case.fetch(c.wanted)


def _finish(w: FrameworkWorker, case: CaseServer, c: p.Finish) -> p.Finished:
    return case.finish(c.evaluate, c.profile)


def _pretouch(w: FrameworkWorker, case: CaseServer, c: p.Pretouch) -> p.Heap:
    return case.pretouch()


def _compiled_seconds(w: FrameworkWorker, case: CaseServer, c: p.CompiledSeconds) -> p.Seconds:
    return case.compiled_seconds()


def _peak_memory(w: FrameworkWorker, case: CaseServer, c: p.MeasurePeakMemory) -> p.PeakMemory:
    return case.peak_memory()


# case command type -> its handler, called with the worker, the case and the command
CASE_COMMANDS: dict[type[p.CaseCommand[Any]], Callable[[FrameworkWorker, CaseServer, Any], Any]] = {
    p.Start: _start,
    p.Evaluate: _evaluate,
    p.Steps: _steps,
    p.Round: FrameworkWorker.round,
    p.BareLoop: FrameworkWorker.bare_loop,
    p.Learn: FrameworkWorker.learn,
    p.Fetch: _fetch,
    p.Finish: _finish,
    p.Pretouch: _pretouch,
    p.CompiledSeconds: _compiled_seconds,
    p.MeasurePeakMemory: _peak_memory,
}
