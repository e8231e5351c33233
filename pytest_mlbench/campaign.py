"""The measurement campaign of a session: every selected case, in several fresh processes.

Variance lives between processes, so each case is sampled in ``processes`` passes, each pass
with fresh workers (one framework per process: frameworks' thread pools never share a timed
process). Within a pass, cases are taken comparison group by comparison group; a group's cases
are built and checked one at a time (compile time is measured on a quiet machine), then their
timed rounds are interleaved in cycles, in a shuffled (seeded) order, each turn with every
other worker stopped (SIGSTOP), so a slow period of the host falls on every implementation
alike instead of on whichever ran then. Compile time is the first pass's; later passes use
the frameworks' compile caches where they have them.

An A/B session has two lanes, the base revision's cases and this one's: their workers live
side by side, a case's base and head turns follow each other (ABAB, the order alternating by
cycle), and pass i of the base pairs with pass i of the head.

Each pass also measures the machine's matrix-multiply peak per framework and dtype in use; the
best is the session's peak, against which every case's GFLOP/s is judged plausible.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_mlbench import data, verify
from pytest_mlbench.case import CaseId
from pytest_mlbench.catalogue import Catalogue
from pytest_mlbench.checks import assert_plausible, tolerances
from pytest_mlbench.engine.launcher import WorkerError
from pytest_mlbench.engine.workers import (
    CaseError,
    CaseFailed,
    CaseSkipped,
    FrameworkPool,
    PoolKey,
    Side,
)
from pytest_mlbench.errors import Unavailable, Unsupported
from pytest_mlbench.pipeline import TURN_WARMUP, CaseRun
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.record import Identity, Measure, Record
from pytest_mlbench.reference import OracleService, Reference

# interleaving cycles per pass: each case takes a turn in every cycle (up to its rounds / 2,
# so that a turn records at least two rounds after its dropped one); even, so that the two
# sides of an A/B pair go first equally often (ABAB..., then BABA...)
CYCLES = 10
LONG_S = 10.0  # a case whose timing is expected to take longer says so as it starts
PLAUSIBLE_MARGIN = 0.25  # GFLOP/s above the session's measured peak by more than this fails


@dataclass(frozen=True)
class Plan:
    """How the campaign measures."""

    timing: bool  # False: --benchmark-disable (check everything, time nothing)
    processes: int
    threads: int
    affinity: str
    seed: int
    size: str
    max_time: float  # seconds of timed rounds per case, over all passes
    min_rounds: int  # per pass


@dataclass(frozen=True)
class Lane:
    """One side's cases: this revision's (the default side) or, for A/B, the base's."""

    side: Side
    catalogue: Catalogue
    cases: tuple[CaseId, ...]


@dataclass
class Outcome:
    status: str  # passed, failed, skipped, error
    message: str = ""
    record: Record | None = None
    rounds: list[float] = field(default_factory=list)  # every timed round, for pytest-benchmark


@dataclass
class CaseState:
    """What a case has collected over the passes."""

    cid: CaseId
    lane: Lane
    passes: list[list[float]] = field(default_factory=list)
    cycles: list[list[int]] = field(default_factory=list)
    compile_s: float | None = None
    first_call_s: float | None = None
    checks: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    digest: str = ""
    outcome: Outcome | None = None  # set when it failed or skipped

    @property
    def alive(self) -> bool:
        return self.outcome is None

    @property
    def key(self) -> str:
        return key_of(self.lane.side, self.cid)


def key_of(side: Side, cid: CaseId) -> str:
    return f"{side.name}|{cid.name}" if side.name else cid.name


class Campaign:
    def __init__(self, lanes: Sequence[Lane], plan: Plan, registry: Mapping[str, str],
                 oracle: OracleService, progress: Callable[[str], None] = lambda line: None,
                 ) -> None:
        self.plan, self.registry, self.oracle, self.progress = plan, registry, oracle, progress
        self.states: dict[str, CaseState] = {}
        for lane in lanes:
            for cid in lane.cases:
                self.states[key_of(lane.side, cid)] = CaseState(cid, lane)
        self.references: dict[tuple[str, str, str], Reference] = {}
        self.contexts: dict[str, verify.Context] = {}
        self.peaks: dict[str, float] = {}
        self.pools: dict[PoolKey, FrameworkPool] = {}
        self.checked_peaks: set[tuple[PoolKey, str]] = set()
        self.caches = ""
        self.cancelled = False

    # -- the whole campaign ---------------------------------------------------------------------

    def run(self) -> dict[str, Outcome]:
        """Every case's outcome, by ``key_of(side, case)`` (the case name on the default side)."""
        started = time.monotonic()
        passes = self.plan.processes if self.plan.timing else 1
        self.caches = tempfile.mkdtemp(prefix="mlbench-caches-")
        try:
            for p in range(passes):
                self._pass(p, passes, started)
        finally:
            self._close_pools()
            self.oracle.close()
            shutil.rmtree(self.caches, ignore_errors=True)
        return {key: self._outcome(state) for key, state in self.states.items()}

    def _pass(self, p: int, passes: int, started: float) -> None:
        done = p * len(self._groups())
        self._start_pools()
        for group, states in self._groups():
            alive = [s for s in states if s.alive]
            if self.cancelled:
                raise KeyboardInterrupt("the campaign was cancelled")
            if not alive:
                continue
            begun = time.monotonic()
            runs = [run for run in (self._prepare(s, p) for s in alive) if run is not None]
            self._announce(runs, p, passes)
            if self.plan.timing and runs:
                self._measure_peaks(runs)
                self._interleave(runs, p)
            else:  # nothing is timed, but the timed path still runs once, audited
                for run in runs:
                    run.audits = {1}
                    self._turn(run, 1, 0, discard=0)
            for run in runs:
                self._finish(run, p)
            done += 1
            self.progress(f"mlbench [process {p + 1}/{passes}] {group}: {len(runs)} case(s) "
                          f"checked{' and timed' if self.plan.timing else ''} in "
                          f"{time.monotonic() - begun:.1f} s; {self._eta(started, done, p)}")
        self._close_pools()

    def cancel(self) -> None:
        """From another thread (Ctrl-C in a session running several check-only campaigns):
        stop at the next group, and end the workers now so that a call in flight returns."""
        self.cancelled = True
        for pool in list(self.pools.values()):
            pool.close()

    def _eta(self, started: float, done: int, p: int) -> str:
        total = len(self._groups()) * (self.plan.processes if self.plan.timing else 1)
        spent = time.monotonic() - started
        left = spent / max(done, 1) * (total - done)
        return f"{spent:.0f} s so far, about {left:.0f} s left" if done < total else \
            f"{spent:.0f} s in all"

    def _announce(self, runs: Sequence[CaseRun], p: int, passes: int) -> None:
        """Long cases (paper sizes) say what they will do, and about how long it takes."""
        for run in runs:
            expected = run.round_s * self.rounds_for(run) if self.plan.timing else run.round_s
            if expected > LONG_S:
                compile_s = f", compiled in {run.compile_s:.1f} s" if run.compile_s else ""
                self.progress(f"mlbench [process {p + 1}/{passes}] {run.spec['name']}: checked"
                              f"{compile_s}; timing {self.rounds_for(run)} round(s) of about "
                              f"{run.round_s:.1f} s (about {expected:.0f} s)")

    def _groups(self) -> list[tuple[str, list[CaseState]]]:
        groups: dict[str, list[CaseState]] = {}
        for state in self.states.values():
            groups.setdefault(state.cid.group, []).append(state)
        return list(groups.items())

    # -- pools ----------------------------------------------------------------------------------

    def _pool(self, state: CaseState, p: int) -> FrameworkPool:
        cid, side = state.cid, state.lane.side
        key = PoolKey(cid.framework, cid.workers, side.name)
        pool = self.pools.get(key)
        if self.cancelled:
            raise KeyboardInterrupt("the campaign was cancelled")
        if pool is None or pool.pool is None:
            self._pause_all()
            pool = self._new_pool(key, side)
            pool.start()
            self.pools[key] = pool
        return pool

    def _new_pool(self, key: PoolKey, side: Side) -> FrameworkPool:
        return FrameworkPool(key, self.registry[key.framework], self.plan.threads,
                             self.plan.affinity, self.caches, side=side)

    def _start_pools(self) -> None:
        """Start every pool this pass will use at once (nothing is timed yet, and importing
        TensorFlow or warming inductor up is seconds of CPU each: the cores share it), then
        stop them all. A pool that fails to start is left out: its cases meet the failure
        again, and report it, when they ask for it."""
        wanted: dict[PoolKey, CaseState] = {}
        for state in self.states.values():
            cid = state.cid
            if state.alive and not cid.workload.unsupported_reason(
                    cid.framework, cid.variant, cid.device, cid.precision, cid.task.label):
                wanted.setdefault(PoolKey(cid.framework, cid.workers, state.lane.side.name),
                                  state)
        fresh = [self._new_pool(key, state.lane.side) for key, state in wanted.items()
                 if key not in self.pools or self.pools[key].pool is None]
        if len(fresh) < 2 or self.cancelled:
            return
        spawned = []
        for pool in fresh:
            try:
                pool.spawn()
                spawned.append(pool)
            except Exception:  # noqa: BLE001 - reported when a case asks for this pool
                pool.close(kill=True)
        for pool in spawned:
            try:
                pool.started()
            except Exception:  # noqa: BLE001 - as above
                pool.close(kill=True)
                continue
            pool.pause()
            self.pools[pool.key] = pool

    def _activate(self, pool: FrameworkPool) -> None:
        """Only ``pool`` runs: every other worker (and the oracle) is stopped."""
        for other in self.pools.values():
            if other is not pool:
                other.pause()
        self.oracle.pause()

    def _pause_all(self) -> None:
        for pool in self.pools.values():
            pool.pause()
        self.oracle.pause()

    def _close_pools(self) -> None:
        """End of a pass (or of the campaign): the workers' work is done and checked, and they
        keep nothing (compile caches are written as they compile), so they are killed rather
        than left to tear their frameworks down on the cores."""
        for key, pool in list(self.pools.items()):
            pool.close(kill=True)
            del self.pools[key]

    # -- one case ---------------------------------------------------------------------------------

    def _context(self, state: CaseState) -> verify.Context:
        cid, lane = state.cid, state.lane
        if state.key not in self.contexts:
            policy = POLICIES[cid.precision]
            inputs, params = data.seeded_start(cid.workload, cid.shape, self.plan.seed, policy)
            ref_key = (lane.side.name, cid.workload.name, cid.shape.label)
            if ref_key not in self.references:
                self.references[ref_key] = Reference(
                    cid.workload, cid.shape, self.plan.seed,
                    str(lane.catalogue.folder(cid.workload.name)), self.oracle)
            side = f" [{lane.side.name}]" if lane.side.name else ""
            self.contexts[state.key] = verify.Context(
                cid, self.references[ref_key], policy,
                tolerances(cid.precision, cid.workload.tolerances), inputs, params,
                f"{cid.framework} {cid.variant} ({cid.name}){side}")
        return self.contexts[state.key]

    def _prepare(self, state: CaseState, p: int) -> CaseRun | None:
        cid = state.cid
        run = None
        try:
            reason = cid.workload.unsupported_reason(cid.framework, cid.variant, cid.device,
                                                     cid.precision, cid.task.label)
            if reason:
                raise Unsupported(reason)
            ctx = self._context(state)
            self._verify_reference(ctx)
            pool = self._pool(state, p)
            self._activate(pool)
            spec = cid.spec(state.lane.side.root or str(state.lane.catalogue.root),
                            self.plan.size, self.plan.seed)
            run = CaseRun(ctx, pool, spec, cid.shape.steps_per_call)
            state.environment.setdefault("workers", [dict(i) for i in pool.info])
            run.prepare(self.plan.threads, self.plan.affinity == "pin")
            state.environment.setdefault("pinned", []).append(run.pinned)
            state.digest = data.digest(ctx.inputs, ctx.params)
            if p == 0:
                state.first_call_s = run.checked_step_s[0] if run.checked_step_s else None
            return run
        except BaseException as exc:  # noqa: BLE001 - each kind of failure is recorded below
            self._fail(state, exc)
            self._close_case(run)
            return None

    def _verify_reference(self, ctx: verify.Context) -> None:
        cid = ctx.cid
        probe = None if cid.task.kind == "train" else verify.probe_of(ctx, 0)
        ctx.reference.verify(cid.task, ctx.inputs, ctx.params, probe)

    def _state(self, run: CaseRun) -> CaseState:
        return self.states[key_of(run.pool.side, run.ctx.cid)]

    def _finish(self, run: CaseRun, p: int) -> None:
        state = self._state(run)
        try:
            self._activate(run.pool)
            facts = run.finish()
            if p == 0:
                state.compile_s = run.compile_s
            if run.seconds and self.plan.timing:
                state.passes.append(list(run.seconds))
            state.checks.setdefault("audited_rounds", []).append(facts["audited_rounds"])
            state.checks["compiles"] = facts["compiles"]
            state.checks["census"] = facts["census"]
            state.environment["peak_memory"] = facts["peak_memory"]
        except BaseException as exc:  # noqa: BLE001
            self._fail(state, exc)
        finally:
            self._close_case(run)

    def _close_case(self, run: CaseRun | None) -> None:
        if run is None:
            return
        try:
            run.close()
        except WorkerError:
            run.pool.close()  # a dead worker: the next case starts a new one

    def _fail(self, state: CaseState, exc: BaseException) -> None:
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise exc
        if isinstance(exc, CaseSkipped | Unavailable | Unsupported):
            state.outcome = Outcome("skipped", str(exc))
        elif isinstance(exc, CaseFailed | AssertionError):
            state.outcome = Outcome("failed", str(exc))
        elif isinstance(exc, WorkerError):
            state.outcome = Outcome("error", f"{state.cid.name}: the worker failed: {exc}")
            for key, pool in list(self.pools.items()):
                if key.framework == state.cid.framework:
                    pool.close()
        elif isinstance(exc, CaseError):
            state.outcome = Outcome("error", f"{state.cid.name}: the implementation raised "
                                             f"{exc}")
        else:
            state.outcome = Outcome("error", f"{state.cid.name}: {type(exc).__name__}: {exc}")

    # -- timing ------------------------------------------------------------------------------

    def _measure_peaks(self, runs: Sequence[CaseRun]) -> None:
        """Each framework's best matmul at each dtype in use; the session keeps the best."""
        wanted = {(run.pool.key, run.ctx.policy.dtype) for run in runs
                  if run.pool.key.workers == 1}
        for key, dtype in sorted(wanted, key=str):
            if (key, dtype) in self.checked_peaks:
                continue
            pool = self.pools[key]
            self._activate(pool)
            try:
                found = pool.peak(dtype)
            except WorkerError:
                found = None
            self.checked_peaks.add((key, dtype))
            if found:
                self.peaks[dtype] = max(self.peaks.get(dtype, 0.0), float(found))

    def rounds_for(self, run: CaseRun) -> int:
        fixed = run.ctx.cid.shape.rounds
        if fixed:
            return max(1, math.ceil(fixed / self.plan.processes))
        budget = self.plan.max_time / self.plan.processes
        return max(self.plan.min_rounds, math.ceil(budget / max(run.round_s, 1e-6)))

    def _interleave(self, runs: Sequence[CaseRun], p: int) -> None:
        by_case: dict[str, list[CaseRun]] = {}
        for run in runs:
            by_case.setdefault(run.ctx.cid.name, []).append(run)
        # the sides of an A/B pair take as many rounds as each other: the slower side's count
        rounds = {name: max(self.rounds_for(r) for r in pair) for name, pair in by_case.items()}
        per_turn = {name: math.ceil(n / min(CYCLES, max(1, n // 2)))
                    for name, n in rounds.items()}
        for run in runs:  # every turn also runs TURN_WARMUP dropped rounds, auditable too
            name = run.ctx.cid.name
            turns = math.ceil(rounds[name] / per_turn[name])
            self._choose_audits(run, rounds[name] + turns * TURN_WARMUP, p)
        names = list(by_case)
        for cycle in range(CYCLES):
            order = data.generator(self.plan.seed, "cycle", str(p), str(cycle)).permutation(
                len(names))
            for i in order:
                pair = by_case[names[i]]
                for run in (pair if cycle % 2 == 0 else pair[::-1]):  # ABAB, then BABA
                    left = rounds[names[i]] - len(run.seconds)
                    self._turn(run, min(per_turn[names[i]], left), cycle)

    def _choose_audits(self, run: CaseRun, total: int, p: int) -> None:
        rng = data.generator(self.plan.seed, run.spec["name"], "audit", str(p))
        count = min(total, 1 + total // 50)
        run.audits = {int(r) for r in rng.choice(range(1, total + 1), count, replace=False)}

    def _turn(self, run: CaseRun, count: int, cycle: int, discard: int = TURN_WARMUP) -> None:
        state = self._state(run)
        if count <= 0 or not state.alive:
            return
        self._activate(run.pool)
        try:
            run.turn(count, discard)
        except BaseException as exc:  # noqa: BLE001
            self._fail(state, exc)
            return
        if len(state.cycles) <= len(state.passes):
            state.cycles.append([])
        state.cycles[len(state.passes)] += [cycle] * count

    # -- results ------------------------------------------------------------------------------

    def _outcome(self, state: CaseState) -> Outcome:
        if state.outcome is not None:
            return state.outcome
        record = self._record(state)
        if record.measure is not None:
            try:
                assert_plausible(record.measure.gflops, record.measure.peak_gflops,
                                 margin=PLAUSIBLE_MARGIN,
                                 where=f"{state.cid.framework} {state.cid.variant} "
                                       f"({state.cid.name})")
            except AssertionError as exc:
                return Outcome("failed", str(exc), record)
        rounds = [t for p in state.passes for t in p]
        return Outcome("passed", "", record, rounds)

    def _record(self, state: CaseState) -> Record:
        cid = state.cid
        identity = Identity(
            workload=cid.workload.name, shape=cid.shape.label, dims=dict(cid.shape.dims),
            task=cid.task.label, kind=cid.task.kind, framework=cid.framework,
            variant=cid.variant, device=cid.device, precision=cid.precision,
            dtype=POLICIES[cid.precision].dtype, workers=cid.workers,
            threads=self.plan.threads, data_sha256=state.digest, head=cid.head)
        measure = None
        if state.passes:
            measure = Measure(
                cid.shape.steps_per_call, tuple(tuple(p) for p in state.passes),
                tuple(tuple(c) for c in state.cycles[:len(state.passes)]),
                state.compile_s, state.first_call_s,
                cid.workload.flops(cid.task, cid.shape.dims),
                self.peaks.get(POLICIES[cid.precision].dtype))
        env = dict(state.environment)
        env.update({"affinity": self.plan.affinity, "processes": len(state.passes),
                    "seed": self.plan.seed, "size": self.plan.size})
        if state.lane.side.name:
            env["side"] = state.lane.side.name
        return Record(identity, cid.name, measure, state.checks, env)


def check_shares(lanes: Sequence[Lane], jobs: int) -> list[list[Lane]]:
    """A session that times nothing may check its cases in ``jobs`` campaigns at once, each
    with its own workers (nothing is timed, so they may share the cores). Whole comparison
    groups are dealt out, the largest first to the share with the fewest cases; an A/B session
    (two lanes) is never split. One share when there is nothing to split."""
    if jobs < 2 or len(lanes) != 1:
        return [list(lanes)]
    lane = lanes[0]
    groups: dict[str, list[CaseId]] = {}
    for cid in lane.cases:
        groups.setdefault(cid.group, []).append(cid)
    shares: list[list[CaseId]] = [[] for _ in range(min(jobs, len(groups)))]
    for cases in sorted(groups.values(), key=len, reverse=True):
        min(shares, key=len).extend(cases)
    if len(shares) < 2:
        return [list(lanes)]
    order = {cid.name: i for i, cid in enumerate(lane.cases)}  # each share keeps the order
    return [[Lane(lane.side, lane.catalogue, tuple(sorted(share, key=lambda c: order[c.name])))]
            for share in shares]
