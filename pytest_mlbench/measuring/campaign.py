"""The measurement campaign of a session: every selected case, in several fresh processes.

Variance lives between processes, so each case is sampled in ``processes`` passes, each pass
with fresh workers (one framework per process: frameworks' thread pools never share a timed
process). A pass alternates two kinds of phase, comparison group by comparison group:

- **untimed** (``untimed_jobs.UntimedJobs``, one job per core at once, never two on one worker):
  the previous group's audits and checks after timing, and this group's building, compiling
  and checks before timing. Nothing is timed, so the cores may be shared;
- **timed**, alone: the matmul peaks, then the group's timed rounds interleaved in cycles, in
  a shuffled (seeded) order, each turn with every other worker stopped (SIGSTOP) and on the
  case's own cores, so a slow period of the host falls on every implementation alike instead
  of on whichever ran then.

The first pass is the full one (measuring/case_run.py): every check, the compile time (cold,
or loaded from the compile cache kept across runs, and then said so), the first call and the
peak memory. Later passes load torch's and numba's kernels from the cache (XLA's processes all
load or all compile: measuring/cache_plan.py) and repeat only the checks a fresh process
needs; every pass's timed rounds are audited.

An A/B session has two lanes, the base revision's cases and this one's: their workers live
side by side, a case's base and head turns follow each other (ABAB, the order alternating by
cycle), and pass i of the base pairs with pass i of the head.

A session that times nothing (``--benchmark-disable``) has one untimed phase: every case is
built, checked, run once (audited) and checked again, one job per core at once.

The campaign drives; others do the parts: the workers' pools (engine/pools.Pools), a case in
one pass (measuring/case_run.py, which hands back what the pass found as one PassFacts), the
timed phase's layout (measuring/schedule.py), a case's collected results and its record
(measuring/outcome.py: CaseState.add takes a pass's facts), the progress lines
(measuring/progress.py). What it is asked to do is a Plan and its Lanes (measuring/plan.py).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from pytest_mlbench import owned, timesheet, variants
from pytest_mlbench import threads as threading_
from pytest_mlbench.checking import phases
from pytest_mlbench.checking.asserts import tolerances
from pytest_mlbench.checking.oracle_client import OracleService
from pytest_mlbench.checking.reference import Reference, one_blas_thread
from pytest_mlbench.engine import leftovers
from pytest_mlbench.engine.launcher import Launch, WorkerError
from pytest_mlbench.engine.pools import (
    CaseError,
    CaseFailed,
    CaseSkipped,
    FrameworkPool,
    PoolKey,
    Pools,
)
from pytest_mlbench.engine.protocol import CaseSpec
from pytest_mlbench.errors import Unavailable, Unsupported
from pytest_mlbench.measuring import schedule
from pytest_mlbench.measuring.cache_plan import CachePlan
from pytest_mlbench.measuring.case_run import DROPPED_CALLS, TURN_WARMUP, CaseRun
from pytest_mlbench.measuring.hostspeed import HostProbe
from pytest_mlbench.measuring.outcome import CaseState, Outcome, key_of, outcome_of
from pytest_mlbench.measuring.plan import Lane, Plan, Side
from pytest_mlbench.measuring.progress import Progress
from pytest_mlbench.measuring.untimed_jobs import Job, UntimedJobs
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads import data

__all__ = ["Campaign", "Lane", "Plan"]


GPU_SLOTS = 2  # pools a framework keeps for a session's untimed GPU cases (_slots)


class Campaign:
    def __init__(self, lanes: Sequence[Lane], plan: Plan, registry: Mapping[str, str],
                 oracle: OracleService, progress: Callable[[str], None] = lambda line: None,
                 launch: Launch | None = None) -> None:
        self.plan, self.oracle, self.lanes = plan, oracle, tuple(lanes)
        # what every worker starts from: ``launch`` (default: this process, then)
        self.pools = Pools(registry, plan.threads, plan.affinity, launch)
        self.states: dict[str, CaseState] = {}
        for lane in lanes:
            for cid in lane.cases:
                self.states[key_of(lane.side, cid)] = CaseState(cid, lane)
        self.references: dict[tuple[str, str, str, str], Reference] = {}
        self.contexts: dict[str, phases.Context] = {}
        self.peaks: dict[str, float] = {}
        self._data_secrets: dict[int, int] = {}  # pass -> its data secret (data_secret)
        # case (outcome.key_of) -> the first pass's calibrated calls a round and a round's seconds
        self._calibration: dict[str, tuple[int, float]] = {}
        self._data_lock = threading.Lock()
        self.peaked: set[tuple[int, PoolKey, str]] = set()
        self.host = HostProbe()  # the host's speed before each timed pass (measuring/hostspeed.py)
        self.sheet = timesheet.Timesheet()  # where the campaign's seconds went (timesheet.py)
        self.pass_no = 0  # the pass under way (0: the first, the one that reports compile time)
        self.progress = Progress(progress, len(self._groups()),
                                 plan.processes if plan.timing else 1, time.monotonic(),
                                 cases=len(self.states))
        # the compile cache kept across runs: which caches each pass reads (cache_plan.py)
        self.cache = CachePlan(plan.compile_cache, "", plan.timing, self.progress.write)
        self.cancelled = False
        # untimed jobs side by side, one per core of the session (they share nothing but
        # the oracle, which serialises its own calls)
        self.untimed = UntimedJobs(len(threading_.cores()), interrupt=self.cancel)

    # -- the whole campaign ---------------------------------------------------------------------

    def run(self) -> dict[str, Outcome]:
        """Every case's outcome, by ``key_of(side, case)`` (the case name on the default side)."""
        self.progress.started = started = time.monotonic()
        passes = self.progress.passes
        self.pools.caches = leftovers.temp_folder("mlbench-caches-")  # removed even if killed
        self.cache.session = self.pools.caches
        try:
            self.cache.open(self.lanes)
            self.pools.kept = self.cache.kept()
            self._listen()
            self.pools.gpu = bool(self.states) and all(
                s.cid.device == "gpu" for s in self.states.values())
            # the parent's own NumPy (references, audits) on one BLAS thread for the whole
            # campaign: it never leaves spinning threads on a core, and threads share it
            with one_blas_thread():
                for p in range(passes):
                    self.pools.xla = self.cache.xla(p)
                    if self.plan.timing:
                        self._pass(p)
                        if p == 0:
                            self.progress.first_pass_s = time.monotonic() - started
                            self.cache.first_pass_done()
                    else:
                        self._check_only()
            self.cache.close(self.states.values())
        finally:
            self.pools.close()
            if self.pools.external is not None:
                self.pools.external.close()
            self.oracle.close()
            self.untimed.close()  # after the workers its threads may have started
            owned.discard(self.pools.caches)  # a leftovers.temp_folder: marked
        return {key: outcome_of(state, self.plan, self.peaks)
                for key, state in self.states.items()}

    def _listen(self) -> None:
        """--mlbench-hosts=external: the listener every parallel case's pool waits on for the
        workers a launcher starts (engine/remote.py), its launch commands said as progress."""
        if self.plan.hosts != "external":
            return
        from pytest_mlbench.engine import remote

        listener = remote.Listener.for_session(remote.parse_address(self.plan.listen))
        listener.say = self.progress.write
        self.pools.external, self.pools.announce = listener, self.progress.write
        self.pools.external_wait_s = self.plan.external_wait_s

    def _pass(self, p: int) -> None:
        """One pass: per group an untimed phase (the previous group's finish, this group's
        prepare) and a timed phase."""
        self.pass_no = p
        self.oracle.pause()  # no worker is alive yet: the probe has the cores to itself
        with self.sheet.phase(p, "probe"):
            self.host.take()
        self._start_pools(p)
        done = p * len(self._groups())
        timed: list[CaseRun] = []  # the group timed last, still to be finished
        last: tuple[str, float] | None = None
        finished: list[CaseState] = []  # the group timed last's cases, for its verdicts
        for group, states in self._groups():
            if self.cancelled:
                raise KeyboardInterrupt("the campaign was cancelled")
            alive = [s for s in states if s.alive]
            begun = time.monotonic()
            with self.sheet.phase(p, "untimed"):
                runs = self._untimed_phase(timed, alive, p)
            if last is not None:
                done += 1
                self._group_done(p, last, timed, done, finished)
            timed, last, finished = runs, (group, begun), states
            for run in runs:
                self.progress.long_case(p, run.spec.name, run.round_s, self.rounds_for(run),
                                        run.compile_s)
            if runs:
                with self.sheet.phase(p, "timed"):
                    self._measure_peaks(runs, p)
                    self._interleave(runs, p)
        with self.sheet.phase(p, "untimed"):
            self._untimed_phase(timed, [], p)
        if last is not None:
            self._group_done(p, last, timed, done + 1, finished)
        self.pools.close()

    def _group_done(self, p: int, group: tuple[str, float], runs: Sequence[CaseRun], done: int,
                    states: Sequence[CaseState]) -> None:
        """A group's progress line: the cases that recorded timed rounds, and its verdicts. A
        cancelled campaign prints none: its cases' errors are the cancel's own (their workers
        killed under them), not what the cases did."""
        if self.cancelled:
            raise KeyboardInterrupt("the campaign was cancelled")
        timed = sum(1 for run in runs if run.ledger.recorded)
        self.progress.group_done(p, *group, timed, done, verdicts=verdicts(states))

    def _untimed_phase(self, finish: Sequence[CaseRun], prepare: Sequence[CaseState],
                       p: int) -> list[CaseRun]:
        """Finish ``finish`` and prepare ``prepare``, side by side; the prepared runs."""
        for state in prepare:  # contexts (seeded data) before the jobs: they share them
            self._context_or_fail(state)
        prepared: dict[str, CaseRun] = {}

        def prepare_one(state: CaseState, key: PoolKey) -> None:
            with timesheet.account(self.sheet, p, key.framework):
                run = self._prepare(state, p, key)
            if run is not None:
                prepared[state.key] = run

        jobs = [Job((run.pool.key,), partial(self._finish_on, run, p)) for run in finish]
        jobs += [Job((self._pool_key(s),), partial(prepare_one, s)) for s in prepare if s.alive]
        self.untimed.run(jobs)
        return [prepared[s.key] for s in prepare if s.key in prepared]

    def _check_only(self) -> None:
        """Nothing is timed: each case is one untimed job (prepare, one audited turn,
        finish), one job per core at once, across groups."""
        self._start_pools(0)
        for state in self.states.values():
            self._context_or_fail(state)
        groups = self._groups()
        members = dict(groups)
        left = {group: sum(s.alive for s in states) for group, states in groups}
        begun: dict[str, float] = {}
        lock = threading.Lock()  # the jobs' threads count down together

        def one(state: CaseState, key: PoolKey) -> None:
            if self.cancelled:
                raise KeyboardInterrupt("the campaign was cancelled")
            group = state.cid.group
            with lock:
                begun.setdefault(group, time.monotonic())
            with timesheet.account(self.sheet, 0, key.framework):
                run = self._prepare(state, 0, key)
                if run is not None:
                    run.audits = {1}
                    self._turn(run, 1, 0, discard=0, alone=False)
                    self._finish(run, 0)
            with lock:
                left[group] -= 1
                if left[group]:
                    return
                done = sum(1 for n in left.values() if not n)
            if self.cancelled:  # its errors are the cancel's (see _group_done)
                raise KeyboardInterrupt("the campaign was cancelled")
            self.progress.group_done(0, group, begun[group], 0, done, timed=False,
                                     verdicts=verdicts(members[group]))

        with self.sheet.phase(0, "untimed"):
            self.untimed.run([Job(self._slots(s), partial(one, s))
                              for _, states in groups for s in states if s.alive])
        self.pools.close()

    def cancel(self) -> None:
        """From another thread, or on Ctrl-C: stop at the next group, and end the workers now
        so that a call in flight returns."""
        self.cancelled = True
        self.pools.stop()

    def _groups(self) -> list[tuple[str, list[CaseState]]]:
        groups: dict[str, list[CaseState]] = {}
        for state in self.states.values():
            groups.setdefault(state.cid.group, []).append(state)
        return list(groups.items())

    # -- pools ----------------------------------------------------------------------------------

    @staticmethod
    def _pool_key(state: CaseState, slot: int = 0) -> PoolKey:
        cid = state.cid
        return PoolKey(cid.framework, cid.workers, state.lane.side.name, slot, cid.nodes)

    def _slots(self, state: CaseState) -> tuple[PoolKey, ...]:
        """The pools a case may run on. A session that times nothing may keep a pool of each
        framework per core, so that one framework's compilations (torch.compile's of every
        workload) need not wait for each other; the later ones start only when a job needs
        them (UntimedJobs prefers a job's first pool). A timed pass has one pool a framework,
        and so has a parallel layout: its workers already take a core each. A GPU case's
        framework keeps at most GPU_SLOTS pools: each holds a CUDA context and its framework's
        GPU runtime on the one device (a pool a core on a 16-core GPU machine started 16 of
        each, and their start took the session's minutes); two still overlap one case's
        compilation with another's run."""
        width = self.untimed.width
        if state.cid.device == "gpu":
            width = min(width, GPU_SLOTS)
        slots = 1 if self.plan.timing or state.cid.workers > 1 else width
        return tuple(self._pool_key(state, slot) for slot in range(slots))

    def _finish_on(self, run: CaseRun, p: int, key: PoolKey) -> None:
        with timesheet.account(self.sheet, p, key.framework):
            self._finish(run, p)

    def _pool(self, state: CaseState, key: PoolKey) -> FrameworkPool:
        """The case's pool, started now if the pass start left it out (or it died). Called
        by one job at a time per pool key (UntimedJobs)."""
        if self.cancelled:
            raise KeyboardInterrupt("the campaign was cancelled")
        return self.pools.running(key, state.lane.side, self._compiled(key))

    def _compiled(self, key: PoolKey) -> str:
        """The device on which the pool warms its framework's compiler up at start, or "" for
        none. Only where compile times are reported (a timed session's first pass) and a live
        case of the pool compiles (anything but eager): a session that times nothing reports
        none, later passes report the first pass's, and the warm-up (inductor's start-up and
        first build, 3-45 s per worker here) would be spent for nothing."""
        if not (self.plan.timing and self.pass_no == 0):
            return ""
        return next((s.cid.device for s in self.states.values()
                     if s.alive and variants.mode(s.cid.variant) != "eager"
                     and key in self._slots(s)), "")

    def _start_pools(self, p: int) -> None:
        """Start the pools this pass will use at once (Pools.start); of a framework's spare
        pools (a session that times nothing) none: they start when a job first needs one."""
        wanted: dict[PoolKey, tuple[Side, str]] = {}
        for state in self.states.values():
            cid = state.cid
            key = self._slots(state)[0]
            if state.alive and key not in wanted and not cid.workload.unsupported_reason(
                    cid.framework, cid.variant, cid.device, cid.precision, cid.task.label):
                wanted[key] = (state.lane.side, self._compiled(key))
        if not self.cancelled:
            with self.sheet.phase(p, "start"):
                ready = self.pools.start(wanted)
            for key, seconds in ready.items():
                self.sheet.add(p, key.framework, "start", seconds)

    def _activate(self, pool: FrameworkPool) -> None:
        """Only ``pool`` runs: every other worker (and the oracle) is stopped."""
        self.pools.pause_all_but(pool)
        self.oracle.pause()

    # -- one case ---------------------------------------------------------------------------------

    def _context(self, state: CaseState) -> phases.Context:
        cid, lane = state.cid, state.lane
        if state.key not in self.contexts:
            policy = POLICIES[cid.precision]
            inputs, params = data.seeded_start(cid.workload, cid.shape, self.plan.seed, policy)
            # a float32 reference is computed on the cases' device (Shape.reference)
            device = cid.device if cid.shape.reference == "float32" else "cpu"
            ref_key = (lane.side.name, cid.workload.name, cid.shape.label, device)
            if ref_key not in self.references:
                self.references[ref_key] = Reference(
                    cid.workload, cid.shape, self.plan.seed,
                    str(lane.catalogue.folder(cid.workload.name)), self.oracle, device)
            side = f" [{lane.side.name}]" if lane.side.name else ""
            self.contexts[state.key] = phases.Context(
                cid, self.references[ref_key], policy,
                tolerances(cid.precision, cid.workload.tolerances,
                           cid.workload.depth_at(cid.shape.dims)), inputs, params,
                f"{cid.framework} {cid.variant} ({cid.name}){side}")
            state.digest = data.digest(inputs, params)
        return self.contexts[state.key]

    def _context_or_fail(self, state: CaseState) -> None:
        """The case's context, made in the session's thread before its jobs run (the jobs
        share the references); a case whose data cannot be made fails here."""
        if not state.alive:
            return
        try:
            self._context(state)
        except BaseException as exc:  # noqa: BLE001 - recorded as the case's outcome
            self._fail(state, exc)

    def data_secret(self, p: int) -> int:
        """Pass ``p``'s data secret (KeySchedule.data_secret): one for every case of the pass,
        so that every framework's timed steps get the same batches and share one reference
        trajectory; a fresh one each pass, so that no pass's batches are known before it."""
        with self._data_lock:
            return self._data_secrets.setdefault(p, secrets.randbits(63))

    def _prepare(self, state: CaseState, p: int, key: PoolKey) -> CaseRun | None:
        cid = state.cid
        run = None
        try:
            reason = cid.workload.unsupported_reason(cid.framework, cid.variant, cid.device,
                                                     cid.precision, cid.task.label)
            if reason:
                raise Unsupported(reason)
            ctx = self._context(state)
            self._verify_reference(ctx)
            pool = self._pool(state, key)
            spec = CaseSpec.of(cid, state.lane.side.root or str(state.lane.catalogue.root),
                               self.plan.size, self.plan.seed)
            # a later pass times at the calls the first pass calibrated (a property of the
            # step, like everything the first pass alone checks)
            known = self._calibration.get(key_of(state.lane.side, cid))
            run = CaseRun(ctx, pool, spec, known[0] if known else cid.shape.steps_per_call,
                          full=p == 0, timed=self.plan.timing,
                          data_secret=self.data_secret(p), calibrated=known is not None,
                          round_s=known[1] if known else 0.0,
                          steps_per_call=cid.shape.steps_per_call)
            run.prepare(self.plan.threads, self.plan.affinity == "pin",
                        pretouch=self.plan.timing)
            if self.plan.timing and known is None:
                self._calibration[key_of(state.lane.side, cid)] = (run.calls, run.round_s)
            return run
        except BaseException as exc:  # noqa: BLE001 - each kind of failure is recorded below
            self._fail(state, exc, run.pool if run else self.pools.get(key))
            self._close_case(run)
            return None

    def _verify_reference(self, ctx: phases.Context) -> None:
        cid = ctx.cid
        probe = None if cid.task.kind == "train" else phases.probe_of(ctx, 0)
        ctx.reference.verify(cid.task, ctx.inputs, ctx.params, probe)

    def _state(self, run: CaseRun) -> CaseState:
        return self.states[key_of(run.pool.side, run.ctx.cid)]

    def _finish(self, run: CaseRun, p: int) -> None:
        state = self._state(run)
        try:
            facts = run.finish()
            state.add(facts)
            if p == 0:  # the pass that reports the compile time: where it came from
                state.compiled_from = self.cache.judged(state.cid, facts.compile_cache)
        except BaseException as exc:  # noqa: BLE001
            self._fail(state, exc, run.pool)
        finally:
            with timesheet.spend("other"):
                self._close_case(run)

    def _close_case(self, run: CaseRun | None) -> None:
        if run is None:
            return
        try:
            run.close()
        except WorkerError:
            run.pool.close()  # a dead worker: the next case starts a new one

    def _fail(self, state: CaseState, exc: BaseException,
              pool: FrameworkPool | None = None) -> None:
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise exc
        import pytest  # loaded already: the campaign runs inside a pytest session

        # pytest.skip from a spec's own code (a reference whose optional package is missing)
        if isinstance(exc, CaseSkipped | Unavailable | Unsupported | pytest.skip.Exception):
            state.outcome = Outcome("skipped", str(exc))
        elif isinstance(exc, CaseFailed | AssertionError):
            state.outcome = Outcome("failed", str(exc))
        elif isinstance(exc, WorkerError):
            state.outcome = Outcome("error", f"{state.cid.name}: the worker failed: {exc}")
            # this case's pool only (its job holds it): the next case starts a new one
            broken = pool or self.pools.get(self._pool_key(state))
            if broken is not None:
                broken.close()
        elif isinstance(exc, CaseError):
            state.outcome = Outcome("error", f"{state.cid.name}: the implementation raised "
                                             f"{exc}")
        else:
            state.outcome = Outcome("error", f"{state.cid.name}: {type(exc).__name__}: {exc}")

    # -- timing ------------------------------------------------------------------------------

    def _measure_peaks(self, runs: Sequence[CaseRun], p: int) -> None:
        """Each framework's best matmul at each compute dtype in use (a mixed policy's
        bfloat16 or float16, not its float32 storage), once in every process (every process is
        treated alike: a large matmul leaves a framework's runtime warmer); the session keeps
        the best."""
        wanted = {(run.pool.key, run.ctx.policy.compute_dtype) for run in runs
                  if run.pool.key.workers == 1}
        for key, dtype in sorted(wanted, key=str):
            if (p, key, dtype) in self.peaked:
                continue
            pool = self.pools[key]
            with timesheet.account(self.sheet, p, key.framework), timesheet.spend("peaks"):
                self._activate(pool)
                try:
                    found = pool.peak(dtype)
                except WorkerError:
                    found = None
            self.peaked.add((p, key, dtype))
            if found:
                self.peaks[dtype] = max(self.peaks.get(dtype, 0.0), float(found))

    def rounds_for(self, run: CaseRun) -> int:
        """Recorded rounds of one case in one process (schedule.rounds_per_process)."""
        plan = self.plan
        return schedule.rounds_per_process(run.ctx.cid.shape.rounds, run.round_s,
                                           plan.processes, plan.max_time, plan.min_rounds)

    def _interleave(self, runs: Sequence[CaseRun], p: int) -> None:
        by_case: dict[str, list[CaseRun]] = {}
        for run in runs:
            by_case.setdefault(run.ctx.cid.name, []).append(run)
        # the sides of an A/B pair take as many rounds as each other: the slower side's count,
        # in turns as long as the side of fewer calls a round needs (schedule.turn_rounds)
        turns = {name: schedule.turns(max(self.rounds_for(r) for r in pair),
                                      per_turn=schedule.turn_rounds(
                                          min(r.calls for r in pair), DROPPED_CALLS))
                 for name, pair in by_case.items()}
        for run in runs:  # every turn also runs TURN_WARMUP dropped rounds, never audited
            counts = turns[run.ctx.cid.name]
            run.audits = schedule.audited_rounds(
                run.schedule.secret, run.spec.name, p,
                schedule.recorded_numbers(counts, TURN_WARMUP))
        names = list(by_case)
        for cycle in range(schedule.CYCLES):
            for i in schedule.cycle_order(self.plan.seed, p, cycle, len(names)):
                pair, counts = by_case[names[i]], turns[names[i]]
                if not counts[cycle]:  # a cycle the case sits out (schedule.turns)
                    continue
                last = not any(counts[cycle + 1:])
                # ABAB, then BABA: by the case's own turns (a case may sit a cycle out)
                first = sum(1 for c in counts[:cycle] if c) % 2 == 0
                for run in (pair if first else pair[::-1]):
                    self._turn(run, counts[cycle], cycle, last=last)

    def _turn(self, run: CaseRun, count: int, cycle: int, discard: int = TURN_WARMUP,
              alone: bool = True, last: bool = False) -> None:
        """``count`` recorded rounds of ``run``; ``alone``: every other worker stopped."""
        state = self._state(run)
        if count <= 0 or not state.alive:
            return
        with timesheet.account(self.sheet, self.pass_no, run.pool.key.framework):
            with timesheet.spend("turns"):
                if alone:
                    self._activate(run.pool)
                try:
                    run.turn(count, discard, cycle)
                    # the same step in a plain loop too, after every BARE_EVERY-th turn
                    # (two moments of a pass, a third of the recorded rounds' cost), and
                    # after the last turn of a case that had no such turn
                    due = cycle % BARE_EVERY == BARE_EVERY - 1 or (last and not run.bare_s)
                    if self.plan.timing and alone and due:
                        run.bare_loop()
                except BaseException as exc:  # noqa: BLE001
                    self._fail(state, exc, run.pool)


BARE_EVERY = 3  # a case's bare loop runs after every BARE_EVERY-th turn of a pass


def verdicts(states: Sequence[CaseState]) -> list[tuple[str, str]]:
    """The (status, message) so far of a group's cases (``passing`` while none is set), for
    its progress line."""
    return [(s.outcome.status, s.outcome.message) if s.outcome is not None else ("passing", "")
            for s in states]
