"""What a case collects over a campaign's passes, and what it comes to: an outcome, and for a
case that ran, its one result record (storing/record.py), made here and nowhere else.

A pass hands what it found of a case over as one value (case_run.PassFacts), which the
case's state takes in one call (``CaseState.add``): a new per-process fact is a field there,
where CaseRun makes it, and where ``add`` or ``record_of`` reads it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pytest_mlbench.checking.asserts import assert_plausible
from pytest_mlbench.measuring.case_run import PassFacts
from pytest_mlbench.measuring.ledger import PassTiming
from pytest_mlbench.measuring.plan import Lane, Plan, Side
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.storing.record import Identity, Measure, Record
from pytest_mlbench.workloads.case import CaseId

PLAUSIBLE_MARGIN = 0.25  # GFLOP/s above the session's measured peak by more than this fails


@dataclass
class Outcome:
    status: str  # passed, failed, skipped, error
    message: str = ""
    record: Record | None = None
    rounds: list[float] = field(default_factory=list)  # every timed round, for pytest-benchmark


@dataclass
class CaseState:
    """What a case has collected over the passes (``add``), or why it stopped (``outcome``)."""

    cid: CaseId
    lane: Lane
    timed: list[PassTiming] = field(default_factory=list)  # the passes that timed rounds
    compile_s: float | None = None
    # what the compile figure came from, "cold" or "cache" ("" eager), and the case's cold
    # figure beside one from the cache (measuring/cache_plan.py, set by the campaign)
    compiled_from: str = ""
    cold_compile_s: float | None = None
    first_call_s: float | None = None
    checks: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    digest: str = ""
    outcome: Outcome | None = None  # set when it failed or skipped

    def add(self, facts: PassFacts) -> None:
        """What one pass found of the case: the record's environment and checks gather every
        pass's; the first (full) pass alone says the compile time, the first call and the
        peak memory."""
        env = self.environment
        env.setdefault("workers", [dict(w) for w in facts.workers])
        env.setdefault("pinned", []).append(facts.pinned)
        if facts.heap:
            env.setdefault("heap", []).append(facts.heap)
        if facts.full:
            self.first_call_s = facts.first_call_s
            self.compile_s = facts.compile_s
            env["peak_memory"] = facts.peak_memory
        if facts.timing is not None:
            self.timed.append(facts.timing)
        checks = self.checks
        checks.setdefault("audited_rounds", []).append(list(facts.audited_rounds))
        checks.setdefault("uncounted_rounds", []).append(list(facts.uncounted_rounds))
        checks.setdefault("audit_secrets", []).append(facts.audit_secret)
        checks.setdefault("data_secrets", []).append(facts.data_secret)
        checks.setdefault("clocks", []).append(facts.clock.to_record())
        checks["compiles"] = facts.compiles
        checks["census"] = facts.census
        checks["arithmetic"] = dict(facts.arithmetic)  # phases.check_arithmetic
        if facts.resident is not None:  # a parallel case: phases.check_sharding
            checks["resident"] = dict(facts.resident)
        if facts.collectives is not None:  # every pass's, per worker
            checks.setdefault("collectives", []).append(list(facts.collectives))

    @property
    def alive(self) -> bool:
        return self.outcome is None

    @property
    def key(self) -> str:
        return key_of(self.lane.side, self.cid)


def key_of(side: Side, cid: CaseId) -> str:
    return f"{side.name}|{cid.name}" if side.name else cid.name


def outcome_of(state: CaseState, plan: Plan, peaks: dict[str, float]) -> Outcome:
    """The case's outcome: its failure or skip, or its record, failed if its GFLOP/s exceed
    the session's measured peak by more than PLAUSIBLE_MARGIN."""
    if state.outcome is not None:
        return state.outcome
    record = record_of(state, plan, peaks)
    if record.measure is not None:
        try:
            assert_plausible(record.measure.gflops, record.measure.peak_gflops,
                             margin=PLAUSIBLE_MARGIN,
                             where=f"{state.cid.framework} {state.cid.variant} "
                                   f"({state.cid.name})")
        except AssertionError as exc:
            return Outcome("failed", str(exc), record)
    rounds = [r.seconds for timing in state.timed for r in timing.rounds]
    return Outcome("passed", "", record, rounds)


def record_of(state: CaseState, plan: Plan, peaks: dict[str, float]) -> Record:
    cid = state.cid
    identity = Identity(
        workload=cid.workload.name, shape=cid.shape.label, dims=dict(cid.shape.dims),
        task=cid.task.label, kind=cid.task.kind, framework=cid.framework,
        variant=cid.variant, device=cid.device, precision=cid.precision,
        dtype=POLICIES[cid.precision].dtype, workers=cid.workers, strategy=cid.strategy,
        nodes=cid.nodes, hosts=plan.hosts if cid.workers > 1 else "local",
        threads=plan.threads, data_sha256=state.digest, head=cid.head)
    measure = None
    if state.timed:
        measure = Measure(
            cid.shape.steps_per_call,
            tuple(tuple(r.seconds for r in t.rounds) for t in state.timed),
            tuple(tuple(r.cycle for r in t.rounds) for t in state.timed),
            state.compile_s, state.first_call_s,
            cid.workload.flops(cid.task, cid.shape.dims),
            peaks.get(POLICIES[cid.precision].compute_dtype),  # the matmuls' dtype
            tuple(t.faults_per_step for t in state.timed),
            tuple(t.calls for t in state.timed),
            tuple(t.bare_step_s for t in state.timed if t.bare_step_s is not None))
    if measure is not None and state.compiled_from:  # cold, or from the compile cache
        measure = replace(measure, compiled_from=state.compiled_from,
                          cold_compile_s=state.cold_compile_s)
    env = dict(state.environment)
    env.update({"affinity": plan.affinity, "processes": len(state.timed),
                "seed": plan.seed, "size": plan.size})
    if state.lane.side.name:
        env["side"] = state.lane.side.name
    return Record(identity, cid.name, measure, state.checks, env)
