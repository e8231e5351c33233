"""One case in one pass, from the parent: prepare (build, check), timed turns, finish.

Every case, single-device or data-parallel, of every kind, goes through this one path; its
worker pool answers the same commands whether it has one rank or several. The checks
themselves are in checking/phases.py (checking/audit.py while timed), the references in checking/reference.py.

Every pass runs the same checks before timing, in a fresh process, against references the
first pass computed (they are cached): every framework traces and compiles the same
functions in the same order in every process (torch and numba load from the compile cache
what the first pass, or an earlier run, compiled; XLA's processes all load or all compile:
measuring/cache_plan.py). Every pass's timed rounds are audited: every round's reads are
checked inside its clock (the framework's own arrays on the device, then one sync), and its
results copied to NumPy after the clock stopped and kept in the worker, a digest of each sent
back with the turn;
which rounds are judged is drawn from a secret only this process holds (KeySchedule.secret),
and they are fetched after their turn and checked against the digests. Inference and
transform probes, and training steps' batches, are keyed by secrets sent with each round
(a turn is one Round command a round): the case's key schedule (measuring/key_schedule.py).
The parent times every turn on its own clock and judges the worker's account of it
(audit.assert_clocks_agree); what the rounds did, and the clock, are the case's round ledger
(measuring/ledger.py).
The first pass also measures the peak memory and checks loss and gradient where training
took the parameters; later passes skip those two, which only repeat the first pass's.

The worker is spoken to in engine/protocol.py's commands, its replies read as their types;
what a pass found of its case goes back to the campaign as one value, ``PassFacts``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from typing import Any, TypeVar

from pytest_mlbench.checking import arithmetic, audit, cores, phases
from pytest_mlbench.checking.asserts import assert_threads
from pytest_mlbench.engine import protocol as p
from pytest_mlbench.engine.pools import FrameworkPool
from pytest_mlbench.measuring.key_schedule import KeySchedule
from pytest_mlbench.measuring.ledger import PassTiming, RoundLedger
from pytest_mlbench.measuring.ranks import agree, agree_kept
from pytest_mlbench.timesheet import charge, spend
from pytest_mlbench.workloads import data

WARMUP = 0  # round 0 is a warm-up: it runs like every other round and is never recorded
TURN_WARMUP = 1  # rounds each timed turn runs first and drops (the worker was just resumed)
DROPPED_CALLS = 1  # the calls such a round makes: the first call after resuming is the cold one
CALL_MIN_S = 120.0  # a timed turn's timeout is 20 times what it should take, at least this
# a timed session's rounds last at least this long: the shape's steps_per_call repeated as
# often as it takes (timeit's autorange, pyperf's loop calibration). A round pays one sync
# (a GPU's: tens of microseconds), two clock reads and its reads' type checks (about a
# microsecond a leaf): under 1% of 10 ms. At most CALLS_FACTOR_MAX times the shape's calls
CALIBRATED_ROUND_S = 0.010
CALLS_FACTOR_MAX = 256
# warm-up rounds at most in a timed session: the first at the shape's calls, then each at the
# calls the last one calibrates, until they stop growing (CaseRun.calibrate)
WARMUP_ROUNDS_MAX = 4
# a first warm-up round this many times the round target needs no second (``settled``): the
# first round after the checks read 1.05-1.7 times the next on the main job (d6f707f), and a
# round twice as fast would still be one the shape's calls fill; most main-job cases (steps of
# 15-440 ms, or the shape's ten steps of 20-30 ms) spent two whole rounds warming up a pass
SETTLED_TIMES = 2.0
# a later pass's warm-up rounds, each of DROPPED_CALLS calls: its first calls (unjudged, before
# timing) have loaded and run the compiled step already and every turn drops its first call,
# so one short round leaves the state timed round 1 starts from; calibrating is the first
# pass's
LATER_WARMUP_ROUNDS = 1
R = TypeVar("R")


@dataclass(frozen=True)
class PassFacts:
    """What one pass found of its case, handed to the case's state in one call
    (outcome.CaseState.add). ``full``: the first pass, which alone says compile time, first
    call and peak memory."""

    full: bool
    workers: tuple[dict[str, Any], ...]  # each rank's WorkerInfo, as the record keeps it
    pinned: dict[str, Any]  # the threads the worker pinned
    heap: dict[str, Any]  # the pre-touch and its repeats ({} for none)
    timing: PassTiming | None  # None: nothing was timed (or nothing recorded)
    audited_rounds: tuple[int, ...]
    uncounted_rounds: tuple[int, ...]  # audited rounds whose step count could not be read
    audit_secret: int
    data_secret: int  # training: the pass's, which drew every timed step's batch
    clock: audit.Clock  # the parent's clock beside the worker's (audit.assert_clocks_agree)
    compiles: dict[str, int]
    census: Any
    arithmetic: dict[str, dict[str, Any]]  # phases.check_arithmetic's findings
    compile_s: float | None = None
    compile_cache: tuple[int, int] | None = None  # the persistent cache's (loaded, compiled)
    first_call_s: float | None = None
    peak_memory: tuple[int, str] | None = None
    resident: dict[str, list[int]] | None = None  # a parallel case's bytes held per worker
    collectives: list[float] | None = None  # its share of a step in collectives per worker


@dataclass
class CaseRun:
    """One case in one pass, driven from the parent: its checks, warm-up and timed turns, its
    audits. The keys its rounds are sent are its ``schedule``'s, what they did its
    ``ledger``'s."""

    ctx: phases.Context
    pool: FrameworkPool
    spec: p.CaseSpec
    calls: int  # steps (or calls) per timed round
    audits: set[int] = field(default_factory=set)  # timed round numbers to audit
    handle: int | None = None
    round_s: float = 0.0  # the warm-up round's duration: what a round costs
    steps_per_call: int = 0  # the shape's calls a round, which recorded rounds are scaled to
    bare_s: list[float] = field(default_factory=list)  # the bare loop's seconds a call
    checked_step_s: list[float] = field(default_factory=list)
    compile_s: float | None = None
    kept: dict[int, Any] = field(default_factory=dict)  # the audited rounds' fetched results
    pinned: dict[str, Any] = field(default_factory=dict)
    heap: dict[str, Any] = field(default_factory=dict)  # the pre-touch (allocator.pretouch)
    full: bool = True  # the first pass: every check, peak memory, the re-check after training
    # a later pass: ``calls`` and ``round_s`` are the first pass's calibration (one warm-up
    # round of one call, LATER_WARMUP_ROUNDS, no calibration: the calls a round makes are a
    # property of the step)
    calibrated: bool = False
    timed: bool = True  # a timed session (False: its rounds are checked, never recorded)
    workers: tuple[dict[str, Any], ...] = ()  # each rank's WorkerInfo as the case opened
    # training: the pass's data secret (Campaign.data_secret: one for every case of the
    # pass); None: one of the case's own
    data_secret: InitVar[int | None] = None
    schedule: KeySchedule = field(init=False)
    ledger: RoundLedger = field(default_factory=RoundLedger)

    def __post_init__(self, data_secret: int | None) -> None:
        self.schedule = KeySchedule(self.spec.name, self.ctx.cid)
        if data_secret is not None:
            self.schedule.data_secret = data_secret

    @property
    def train(self) -> bool:
        return self.ctx.cid.task.kind == "train"

    def _ask(self, command: p.CaseCommand[R]) -> R:
        """The command's reply, agreed by every rank."""
        assert self.handle is not None
        return agree(self.pool.case(self.handle, command), self.ctx.where)

    def _gradient(self, key: int = 0) -> p.Gradient:
        found = self._ask(p.Evaluate(key))
        if not isinstance(found, p.Gradient):
            raise AssertionError(f"{self.ctx.where}: the worker evaluated a training step "
                                 f"into {type(found).__name__}, not a loss and gradient")
        return found

    def _output(self, index: int = 0) -> Any:
        found = self._ask(p.Evaluate(index))
        if not isinstance(found, p.Output):
            raise AssertionError(f"{self.ctx.where}: the worker evaluated a "
                                 f"{self.ctx.cid.task.kind} call into {type(found).__name__}")
        return found.value

    # -- before timing ----------------------------------------------------------------------

    def prepare(self, threads: int, pin: bool, pretouch: bool = False) -> None:
        """Build in the worker, then the checks that come before timing; ``pretouch`` (a
        timed session): then the worker's heap is faulted in (engine/allocator.py). The
        first pass (``full``) checks everything; a later one what a fresh process can change:
        its threads, the start's bytes, dtypes, optimizer state and census (check_start). The
        gradient, first steps, trajectory and first probe are properties of the code, checked
        once a run; every pass's audits judge its own timed rounds against the reference."""
        began = time.perf_counter()
        with spend("build"):
            self.handle = self.pool.open(self.spec)
        built = time.perf_counter()
        with spend("checks_before"):
            self.workers = tuple(info.as_record() for info in self.pool.info)
            for info in self.pool.info:
                assert_threads(info.threads, self.expected_threads(), where=self.ctx.where)
            phases.check_start(self.ctx, self._ask(p.Start()))
            if not self.full:  # the code's checks were the first pass's; its first calls
                # still come before timing (compiling, or loading the compiled code)
                self._first_calls()
            elif self.train:
                self._prepare_train()
            else:
                phases.check_output(self.ctx, self._output(), 0, "for the first probe")
                for index in range(1, self._precise_points()):
                    phases.check_output(self.ctx, self._output(index), index,
                                        f"for probe {index}")
                phases.check_precise(self.ctx, f"{self.ctx.cid.task.describe()} for the "
                                               "first probe")
        checked = time.perf_counter()
        with spend("warmup"):
            self._warm_up(pin, pretouch)
        # the first calls' compilation ran inside the build and the checks: charged apart
        compiled = self.compile_s or 0.0
        from_checks = min(compiled, checked - built)
        charge("compile", from_checks, instead_of="checks_before")
        charge("compile", min(compiled - from_checks, built - began), instead_of="build")

    def _warm_up(self, pin: bool, pretouch: bool) -> None:
        """Warm-up rounds (never recorded): two, or in a timed session's first pass as many as
        calibrating a round takes (``calibrate``), the fastest saying what a round costs; in a
        later pass one of one call (LATER_WARMUP_ROUNDS). The state the last leaves is where
        timed round 1 starts. Then the heap pre-touch (a timed session)
        and the compile time the first calls took."""
        times: list[float] = []  # each warm-up round's seconds a call
        self.steps_per_call = self.steps_per_call or self.calls
        # a later pass's warm-up is as long as a turn's dropped round (one call), unless it
        # learns which threads work to pin them (a whole round)
        calls = DROPPED_CALLS if self.calibrated and not pin else self.calls
        for warm_up in range(WARMUP_ROUNDS_MAX if not self.calibrated else LATER_WARMUP_ROUNDS):
            keys = self.schedule.round_keys(calls)
            command: p.CaseCommand[p.RoundRan] = p.Round(calls, keys)
            if pin and warm_up == 0:  # also finds the threads that worked and pins them
                command = p.Learn(p.Round(calls, keys), pin=True)
            warm = self._ask(command)
            times.append(float(warm.seconds) / calls)
            self._ran(WARMUP, warm, keys)
            grown = (self.timed and not self.calibrated
                     and self.calibrate(warm, last=warm_up == WARMUP_ROUNDS_MAX - 1))
            if (warm_up >= 1 or settled(warm.seconds, calls, self.steps_per_call)) \
                    and not grown:
                break
        # at the calls every timed round makes; a later pass keeps the first pass's figure
        # (its first round loads the compiled code: no measure of a round's cost)
        self.round_s = self.round_s or min(times) * self.calls
        if pretouch:
            with spend("pretouch"):
                self.heap = self._ask(p.Pretouch()).facts
        self.compile_s = float(self._ask(p.CompiledSeconds()).value)
        self.pinned = self.pool.worker_info()[0].pinned if self.pool.pool else {}

    def calibrate(self, warm: p.RoundRan, *, last: bool) -> bool:
        """Whether another warm-up round is owed, at the calls it sets: the calls a round at
        this one's cost a call would need (calibrated_calls) grow past the calls it ran, and
        it is not the last allowed. The first round's first calls are slow (a 35 us step read
        82 us a call there, and its rounds lasted 3 ms): a second at the calls it calibrates
        reads the step's own cost, and calibrates again. The round's clock, not the work
        after it: a state's host copies cost the same at any calls, and counting them would
        shorten the rounds of a large model (a GPU's copies are tens of milliseconds)."""
        calls = calibrated_calls(self.steps_per_call,
                                 float(warm.seconds) / self.calls * self.steps_per_call)
        if calls <= self.calls or last:
            return False
        self.calls = calls
        return True

    def expected_threads(self) -> int:
        """Threads each worker of this case's pool must have (FrameworkPool's rule)."""
        return self.pool.per_worker_threads(self.pool_world())

    def pool_world(self) -> int:
        return len(self.pool.info) or 1

    def _precise_points(self) -> int:
        """Results of the seeded start "too precise" judges (arithmetic.PRECISE_POINTS), where
        it is judged: a float32 case whose spec has the NumPy function (one point elsewhere)."""
        return arithmetic.PRECISE_POINTS if self.ctx.precise else 1

    def _prepare_train(self) -> None:
        ctx = self.ctx
        phases.check_gradient(ctx, self._gradient())
        for key in range(1, self._precise_points()):  # public batches of the seeded start
            phases.check_gradient(ctx, self._gradient(key), key)
        if ctx.precise:
            self._gradient()  # the seeded data fed again: the checked steps train on them
        phases.check_precise(ctx, "gradient at the start")
        phases.check_steps(ctx, *self._checked_steps())

    def _first_calls(self) -> None:
        """A later pass's calls before timing, as the first pass made them (loss and gradient
        and the checked steps, or the first probe's call), their results not judged again:
        every function the implementation compiles is traced before timing, in every pass."""
        if self.train:
            self._gradient()
            self._checked_steps()
        else:
            self._output()

    def _checked_steps(self) -> tuple[p.Stepped, p.Stepped | None]:
        """The workload's checked steps from the seeded start, untimed: the first, then the
        rest (their first calls compile, or load the compiled code)."""
        first = self._ask(p.Steps(1))
        steps = self.ctx.cid.workload.check_steps
        rest = self._ask(p.Steps(steps - 1)) if steps > 1 else None
        self.schedule.steps_sent = steps
        self.checked_step_s = list(first.times) + list(rest.times if rest else [])
        return first, rest

    def _ran(self, r: int, reply: p.RoundRan, keys: list[int]) -> None:
        """What the worker said of round ``r``, run on ``keys``; training: its count of steps
        made, which must be the steps whose batches it was sent."""
        self.schedule.ran(r, keys)
        self.ledger.ran(r, reply)
        sent = self.schedule.steps_sent
        if self.train and reply.steps is not None and int(reply.steps) != sent:
            raise AssertionError(
                f"{self.ctx.where}: the worker has made {reply.steps} training step(s) where "
                f"the harness sent the batches of {sent}: the count from the "
                "seeded start, and every step's batch, would be wrong")

    # -- timed ------------------------------------------------------------------------------

    def turn(self, rounds: int, discard: int = TURN_WARMUP, cycle: int = 0) -> list[float]:
        """The next ``rounds`` recorded rounds after ``discard`` more run first and dropped
        (the first round after the worker resumes from SIGSTOP pays for cold caches and the
        other workers' traces), in ``cycle`` of the pass's timed phase; returns the recorded
        seconds (the slowest rank's). Discarded rounds are numbered and run like any other,
        never audited (schedule.audited_rounds: the worker can tell them). One Round command
        a round, each with its own keys (``follows`` set on all but the first): the worker
        learns a round's probes or batches only as that round starts."""
        first = self.ledger.rounds_done + 1
        total = rounds + discard
        numbers = list(range(first, first + total))
        assert self.handle is not None
        # a turn may take what its rounds should take, many times over, but not for ever
        timeout = max(CALL_MIN_S, 20 * self.round_s * total)
        took, parts = 0.0, []  # parts: each round's replies, one a rank
        for i, r in enumerate(numbers):
            # a dropped round is one call (the worker was just resumed: its first call pays
            # for cold caches, not a whole calibrated round)
            calls = DROPPED_CALLS if i < discard else self.calls
            keys = self.schedule.round_keys(calls)
            self.ledger.round_calls[r] = calls
            began = time.perf_counter()  # the parent's own clock (audit.assert_clocks_agree)
            part = self.pool.case(
                self.handle, p.Round(calls, keys, follows=i > 0, ends=i == total - 1),
                timeout=timeout)
            took += time.perf_counter() - began
            self._ran(r, part[0], keys)
            parts.append(part)
        seconds = [max(float(r.seconds) for r in part) for part in parts]
        faults = [max(r.faults for r in part) for part in parts]
        # the turn is the caller's "turns"; its rounds' own seconds are charged apart
        charge("timed", sum(seconds[discard:]), instead_of="turns")
        charge("dropped", sum(seconds[:discard]), instead_of="turns")
        self.ledger.clocked(took, parts, seconds, discard=discard,
                            bounded=self.ctx.cid.device == "cpu")
        self._judge_cores(list(zip(*parts, strict=True)), numbers)
        with spend("audits"):
            self._fetch(numbers)
        # the turn's first round alone re-pre-touches (one that ``follows`` does not)
        self._pretouched_again([r.pretouched for r in parts[0] if r.pretouched])
        # recorded as the seconds of the shape's steps_per_call calls (Measure's unit)
        scale = self.steps_per_call / self.calls if self.steps_per_call else 1.0
        self.ledger.record(seconds, faults, discard=discard, cycle=cycle, scale=scale)
        return seconds[discard:]

    def _judge_cores(self, ranks: Sequence[Sequence[p.RoundRan]],
                     numbers: Sequence[int]) -> None:
        """The turn's cores used and the controls its workers hold (checking/cores.py;
        ``ranks``: each rank's replies to its rounds); the largest ratio of cores used to the
        case's threads, and the most threads and processes held new, kept; what reading them
        cost the worker, charged."""
        charge("cores", max(sum(r.usage_s for r in rank) for rank in ranks), instead_of="turns")
        ratio = cores.assert_turn(ranks, numbers, threads=self.expected_threads(),
                                  device=self.ctx.cid.device, where=self.ctx.where)
        held = max(len(u.new_threads) + len(u.new_processes) if (u := rank[-1].usage) else 0
                   for rank in ranks)
        self.ledger.cores(ratio, held)

    def bare_loop(self) -> None:
        """The built step in a plain loop, right after a turn (the worker warm, alone on the
        cores): a round's calls (runners.bare_loop), its seconds a call, the slowest rank's.
        One a turn, so that the bare figure is a median over the pass's moments as the
        audited one is (one loop at the pass's end read the host's one moment: 0.75-1.32 of
        the figure over a main job). Informative, never audited: the record's ``overhead``
        is the figure over it."""
        assert self.handle is not None
        keys = self.schedule.bare_keys(self.calls)
        replies = self.pool.case(self.handle, p.BareLoop(keys))
        self.bare_s.append(max(float(s.value) for s in replies))

    def _fetch(self, numbers: Sequence[int]) -> None:
        """After every turn, the results of its audited rounds (training: and of the round
        before each), fetched from the worker, which kept every round's alike, and checked
        against the digests it sent before it could know which were wanted. A turn without
        an audited round fetches one round all the same, drawn from the secret (a decoy,
        its digest checked, never judged): every turn looks alike from the worker, which
        so never learns that a pass's audits are spent and the rounds left are unread."""
        chosen = [r for r in sorted(self.audits) if r in numbers] or [
            self.schedule.decoy(numbers)]
        wanted: dict[int, int | None] = {}
        for r in chosen:
            wanted[r] = self._audit_call(r)
            if self.train and r - 1 in self.ledger.serial_of:
                wanted.setdefault(r - 1, None)
        found = self._fetch_rounds(wanted)
        keep = {r for r in chosen if r in self.audits}
        keep |= {r - 1 for r in keep}
        self.kept.update({r: v for r, v in found.items() if r in keep})

    def _fetch_rounds(self, wanted: Mapping[int, int | None]) -> dict[int, Any]:
        """Rounds' results from the worker, checked against their digests and agreed by
        every rank."""
        assert self.handle is not None
        # by how many rounds each is behind the latest: the same on every rank (a pinning
        # warm-up repeats its round a number of times each rank chooses for itself)
        serial_of = self.ledger.serial_of
        latest = max(serial_of.values())
        order = sorted(wanted)
        ask = [(latest - serial_of[r], wanted[r]) for r in order]
        replies = self.pool.case(self.handle, p.Fetch(ask))
        by_round = [dict(zip(order, reply.results, strict=True)) for reply in replies]
        for r, found in by_round[0].items():
            self._check_digest(r, wanted[r], found)
        return agree_kept(by_round, self.ctx.where)

    def _check_digest(self, r: int, call: int | None, found: Any) -> None:
        """``found`` is what the worker reported for round ``r`` when it ran."""
        began = time.perf_counter()
        if call is None:
            digest = data.digest(found["params"], found["state"])
            sent = self.ledger.digests[r]
        else:
            digest = data.digest(found if isinstance(found, Mapping) else {"": found})
            sent = self.ledger.digests[r][call]
        self._round_work(r, call, time.perf_counter() - began)
        if digest != sent:
            raise AssertionError(
                f"{self.ctx.where} timed round {r} (audited): the results the worker gave "
                f"when asked after the turn (digest {digest}) are not those it reported as "
                f"the round ended ({sent}): changed after the clock stopped")

    def _pretouched_again(self, redone: list[dict[str, Any]]) -> None:
        """The heap record's count of turns whose workers found the heap changed since the
        pre-touch and pre-touched it again (``again``); a re-pre-touch that could not be
        done is not counted, and why it was not is kept (``again_failed``)."""
        if not redone:
            return
        failed = [d.get("why", "unknown") for d in redone if not d.get("pretouched")]
        if failed:
            self.heap["again_failed"] = failed[-1]
        else:
            self.heap["again"] = self.heap.get("again", 0) + 1

    # -- after timing -----------------------------------------------------------------------

    def finish(self) -> PassFacts:
        """Audits, then the checks of what timing left behind; what the pass found."""
        with spend("audits"):
            uncounted = self._audit()
        with spend("checks_after"):
            self._controls_kept()
            memory = self._ask(p.MeasurePeakMemory()).found if self.full else None
            done = self._ask(p.Finish(self.full, profile=self.timed))
            phases.check_finish(self.ctx, done)
        self.compile_s = done.compile_s
        ledger = self.ledger
        return PassFacts(
            full=self.full, workers=self.workers, pinned=self.pinned, heap=self.heap,
            timing=ledger.timing(self.calls, self.bare_s) if self.timed else None,
            audited_rounds=tuple(sorted(r for r in self.audits if r <= ledger.rounds_done)),
            uncounted_rounds=tuple(uncounted), audit_secret=self.schedule.secret,
            data_secret=self.schedule.data_secret,
            clock=ledger.clock, compiles=done.compiles, census=done.census,
            arithmetic=dict(self.ctx.arithmetic), resident=done.resident,
            collectives=done.collectives,
            compile_s=self.compile_s if self.full else None,
            compile_cache=done.compile_cache if self.full else None,
            first_call_s=(self.checked_step_s[0] if self.checked_step_s else None)
            if self.full else None,
            peak_memory=memory)

    def _controls_kept(self) -> None:
        """Every thread control the framework reports, read in full again after timing,
        as the session set it (checking/cores.py; each turn read the cheap ones)."""
        if self.ledger.rounds_done < 1:
            return
        for before, info in zip(self.workers, self.pool.worker_info(), strict=True):
            cores.assert_controls_kept(before["threads"], info.threads, self.expected_threads(),
                                       where=self.ctx.where)

    def _audit(self) -> list[int]:
        """The audited rounds judged, the last state counted, the clocks compared; the rounds
        whose count from the seeded start could not be read."""
        uncounted = []  # rounds whose count from the start could not be read (checking/audit.py)
        for r in sorted(self.audits):
            if r <= self.ledger.rounds_done:
                found = self.schedule.audited(r, self.ledger.round_calls.get(r, self.calls))
                if audit.audit(self.ctx, r, found.calls, self.kept.get(r - 1), self.kept[r],
                               found.call, found.key, found.batches,
                               self.schedule.data_secret):
                    uncounted.append(r)
        self._count_final(uncounted)
        if self.timed:
            audit.assert_clocks_agree(self.ledger.clock, where=self.ctx.where)
        else:
            # nothing is timed or reported, and the parent's clock is not the turn's alone:
            # its other threads run tests and jobs beside it (a turn of 12 ms on the worker's
            # clock took 391 ms on the parent's in a loaded test line)
            self.ledger.not_judged("a session that times nothing")
        return uncounted

    def _audit_call(self, r: int) -> int | None:
        """The call of round ``r`` its audit judges (None: training, the state it left)."""
        return self.schedule.audit_call(r, self.ledger.round_calls.get(r, self.calls))

    def _round_work(self, r: int, call: int | None, digest_s: float) -> None:
        """What the harness's own work between two rounds costs, as this process does it:
        a digest of a round's results, and (inference, transforms) each call's probe. It
        bounds the time a worker's clock may put between its rounds
        (audit.assert_clocks_agree)."""
        work = digest_s
        if call is not None:
            began = time.perf_counter()
            phases.probe_of(self.ctx, self.schedule.keys[r][call])
            work = (digest_s + time.perf_counter() - began) * self.calls
        self.ledger.round_work(work)

    def _count_final(self, uncounted: list[int]) -> None:
        """Training: the state the pass's last round left, counted from the seeded start
        (audit.audit_step_count, as far as the reference is affordable): an implementation
        that falls behind the work it reports after any step shows there, whichever rounds
        were audited. Fetched after the last turn, when nothing is left to hide."""
        last = self.ledger.rounds_done
        if (not self.train or last < 1 or last in self.audits
                or last not in self.ledger.serial_of):
            return
        self.kept.update(self._fetch_rounds({last: None}))
        label = (f"{self.ctx.where} the state after the pass's last timed round {last} "
                 "(counted at the end of the pass):")
        if audit.audit_step_count(self.ctx, self.kept[last], where=label,
                                  secret=self.schedule.data_secret):
            uncounted.append(last)
            self._audit_last(last)

    def _audit_last(self, last: int) -> None:
        """Where the pass's last state cannot be counted (honest runs rounded differently
        leave the step there: audit.count_unreadable), its last round is judged from the
        round's start instead, each step on its own batch: parameters reported a step behind
        moved by the batches before the round's, not the round's (tests/cheats/lag128, whose
        count the smoke MLP could not read at the step a loaded host's calibration ended on,
        while no audited round lay past its step 128). The round before it is still in the
        worker: a turn keeps the previous turn's latest round."""
        if last - 1 not in self.ledger.serial_of:
            return
        self.kept.update(self._fetch_rounds({last - 1: None}))
        found = self.schedule.audited(last, self.ledger.round_calls.get(last, self.calls))
        audit.audit(self.ctx, last, found.calls, self.kept[last - 1], self.kept[last],
                    found.call, found.key, found.batches, self.schedule.data_secret,
                    count=False)  # the count was just asked: not its companions or budget again

    def close(self) -> None:
        if self.handle is not None:
            try:
                self.pool.close_case(self.handle)
            finally:
                self.handle = None


def settled(seconds: float, calls: int, steps_per_call: int) -> bool:
    """Whether a first warm-up round of ``calls`` calls that took ``seconds`` already says
    what a round's calls are: it ran the shape's calls and lasted SETTLED_TIMES the round
    target, so even a next round twice as fast would calibrate to the same calls (a second
    warm-up round is then a whole step spent to learn nothing)."""
    return calls == steps_per_call and seconds >= SETTLED_TIMES * CALIBRATED_ROUND_S


def calibrated_calls(steps_per_call: int, round_s: float) -> int:
    """Calls a timed round makes: the shape's ``steps_per_call`` times the smallest whole
    factor that makes a round of ``round_s`` (at the shape's calls) last
    CALIBRATED_ROUND_S, at most CALLS_FACTOR_MAX."""
    factor = math.ceil(CALIBRATED_ROUND_S / max(round_s, 1e-9))
    return steps_per_call * min(max(factor, 1), CALLS_FACTOR_MAX)
