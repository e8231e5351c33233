"""What a case collects over a campaign's passes, and what it comes to: an outcome, and for a
case that ran, its one result record (storing/record.py), made here and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_mlbench.checking.asserts import assert_plausible
from pytest_mlbench.engine.pools import Side
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.storing.record import Identity, Measure, Record
from pytest_mlbench.workloads.case import CaseId

if TYPE_CHECKING:
    from pytest_mlbench.measuring.campaign import Lane, Plan

PLAUSIBLE_MARGIN = 0.25  # GFLOP/s above the session's measured peak by more than this fails


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
    faults: list[float] = field(default_factory=list)  # page faults per timed step, per pass
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
    rounds = [t for p in state.passes for t in p]
    return Outcome("passed", "", record, rounds)


def record_of(state: CaseState, plan: Plan, peaks: dict[str, float]) -> Record:
    cid = state.cid
    identity = Identity(
        workload=cid.workload.name, shape=cid.shape.label, dims=dict(cid.shape.dims),
        task=cid.task.label, kind=cid.task.kind, framework=cid.framework,
        variant=cid.variant, device=cid.device, precision=cid.precision,
        dtype=POLICIES[cid.precision].dtype, workers=cid.workers,
        threads=plan.threads, data_sha256=state.digest, head=cid.head)
    measure = None
    if state.passes:
        measure = Measure(
            cid.shape.steps_per_call, tuple(tuple(p) for p in state.passes),
            tuple(tuple(c) for c in state.cycles[:len(state.passes)]),
            state.compile_s, state.first_call_s,
            cid.workload.flops(cid.task, cid.shape.dims),
            peaks.get(POLICIES[cid.precision].dtype),
            tuple(state.faults[:len(state.passes)]))
    env = dict(state.environment)
    env.update({"affinity": plan.affinity, "processes": len(state.passes),
                "seed": plan.seed, "size": plan.size})
    if state.lane.side.name:
        env["side"] = state.lane.side.name
    return Record(identity, cid.name, measure, state.checks, env)
