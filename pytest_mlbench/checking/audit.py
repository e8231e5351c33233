"""Correct while timed: an audited round (drawn from a secret of the parent's; every round is
read alike, so the implementation cannot tell it from the others) did the reference's work
from where it started, and its parameters, like those the pass ended with, are the
reference's after as many steps from the seeded start as step() has been called, where a
count can be read at all and the reference's steps that far are affordable (always up to
ABSOLUTE_STEPS). And the worker's clock agrees with the parent's (assert_clocks_agree)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from pytest_mlbench.checking.asserts import assert_at_step, assert_same_keys
from pytest_mlbench.checking.phases import (
    Context,
    assert_moved_like_reference,
    assert_params_displaced,
    check_output,
    seeded_trajectory,
)
from pytest_mlbench.checking.trajectory import State
from pytest_mlbench.workloads import data

# audited rounds up to this many steps are always checked from the start too; beyond, and at
# the state a pass ends in, as far as the reference's trajectory there costs under
# COUNT_BUDGET_S to compute (cached: once per case and pass, each pass drawing its own
# batches). 3 s: with rounds calibrated to 10 ms a small model makes tens of thousands of
# steps a pass, and 10 s a pass was 12 s of an 18 s A/B session of a toy (its count still
# reaches some 10,000 steps)
ABSOLUTE_STEPS = 128
COUNT_BUDGET_S = 3.0
BUDGET_STRIDE = 64  # steps the trajectory is extended by between looks at the budget
NEAREST_SEARCH = 8  # reference steps either side searched for the ones failing params are near
# an honest companion (Reference.companion) further than this many steps' length from the
# reference's step, or nearer another step, and a count cannot be read there: an honest run
# may then be half a step along the trajectory (the nearest-step rule's limit). vit at seed 8:
# torch-jit nearest another step at step 40 while two companions sat 0.68 and 0.84 steps'
# length away, nearest step 40, and a third 1.53, nearer step 39
COUNT_READABLE = 0.5
COMPANIONS = 3  # companions, each with its own dither, that must all be readable


# what a training round's audit adds: each step's batch reaches the worker with its round
AHEAD = ("; each step's batch is sent with its round, so work done ahead (in build() or an "
         "earlier round) or a step that did not read its batch from case.batch() as it was "
         "called fails here too")


def audit(ctx: Context, round_no: int, calls: int, before: Any, after: Any,
          call: int | None, key: int | None = None, batches: Sequence[int] | None = None,
          secret: int | None = None, count: bool = True) -> str | None:
    """An audited round did the reference's work: ``calls`` optimizer steps from the state it
    started in, each on its batch (``batches``: the keys sent with the round; ``secret``: the
    pass's data secret they were drawn from), or the right result for the probe of its call
    ``call`` (probe ``key``, the secret the parent sent with the round). Returns why the
    round's count from the seeded start was not judged, if it was not (audit_step_count;
    ``count`` False: the round's own steps alone, where the count was already asked)."""
    label = (f"{ctx.where} timed round {round_no} (audited): the implementation did less or "
             "different work while timed than the checked steps showed;")
    try:
        if ctx.cid.task.kind == "train":
            try:
                assert_moved_like_reference(
                    ctx, before, after, calls, batches=batches,
                    where=f"{label} {calls} step(s) from the round's start")
            except AssertionError as exc:
                raise AssertionError(f"{exc}{AHEAD if batches else ''}") from None
            return audit_step_count(ctx, after, where=label, secret=secret) if count else None
        assert call is not None
        index = round_no * calls + call if key is None else key
        check_output(ctx, after, index, f"of call {call} (probe {index})", where=label)
        return None
    except AssertionError as exc:
        raise AssertionError(str(exc)) from None


def audit_step_count(ctx: Context, after: Mapping[str, Any], *, where: str,
                     secret: int | None = None) -> str | None:
    """The round's parameters are the reference's after as many steps from the seeded start as
    the engine has called step() (its count, not the implementation's).

    The round-relative check cannot see an implementation that reports parameters a constant
    number of steps behind (work handed to a thread, a stale array returned by params()):
    every round then looks like a right step from a state that is itself behind. Counted from
    the start, the missing steps show. A fixed tolerance cannot tell them, though: an honest
    run's rounding drift from the float64 reference grows with the steps, past any tolerance
    that still sees a step's difference. So the parameters pass within the trajectory
    tolerance of the reference's step N, or else when they are nearer step N than either
    neighbour (assert_at_step: drift across the trajectory, which under Adam outgrows half a
    step, moves the distance to every step alike).

    Where training amplifies rounding (vit at seed 7: a loss spike near step 35, after which
    torch-eager sits 0.18-0.36 from the reference, 1 to 45 steps' length, nearest step N - 1
    at steps 40 to 70, and a run a step behind nearest step N at 40 and 50), no count can be
    read from the parameters at all. Before failing, the audit asks whether honest runs of
    the reference's steps, differing only in their rounding (Reference.companion), can be
    counted there (count_unreadable); if one cannot, the count is not judged and the reason
    is returned (the record keeps the round). The round-relative check still judged the
    round's work, and an implementation behind from the start is caught at the rounds where
    the count can be read. Always up to ABSOLUTE_STEPS steps, and beyond as far as the
    reference's trajectory is affordable (``affordable``), from the Reference's cached
    trajectories; a count past that is not judged and the reason returned, as above."""
    steps = after.get("steps")
    if steps is None:
        return None
    n = int(steps)
    if not affordable(ctx, n, secret):
        return (f"step {n} not counted from the seeded start: the float64 reference's "
                f"trajectory that far costs more than {COUNT_BUDGET_S:g} s here (the round's "
                "own steps were judged)")
    label = (f"{where} {n} step(s) from the seeded start (step() has been called {n} "
             "time(s); are the reported parameters behind the work, or is work left running "
             "after the round?)")
    assert_same_keys(after["params"], ctx.params, where=f"{label}, parameters")
    trajectory = seeded_trajectory(ctx, secret)
    try:  # within tolerance of step n: its neighbours are not asked for (nor computed)
        assert_params_displaced(ctx, ctx.params, after["params"], trajectory.state(n)[0], n,
                                where="")
        return None
    except AssertionError as exc:
        outside = str(exc)
    near = trajectory.states(max(n - 1, 0), n + 1)
    found = _flat(after["params"])
    try:
        assert_at_step(found, _flat_steps(near), step=n, outside=outside, where=label)
        return None
    except AssertionError:
        if np.all(np.isfinite(found)):
            why = count_unreadable(ctx, n, near, secret)
            if why:
                return why
        # the verdict is in: a wider stretch of the trajectory names the step they are nearest
        wide = trajectory.states(max(n - NEAREST_SEARCH, 0), n + NEAREST_SEARCH)
        assert_at_step(found, _flat_steps(wide), step=n, outside=outside, where=label)
        raise


def affordable(ctx: Context, n: int, secret: int | None = None) -> bool:
    """Whether the reference's trajectory reaches step ``n`` within COUNT_BUDGET_S (always,
    up to ABSOLUTE_STEPS): it is extended BUDGET_STRIDE steps at a time, and what it computed
    stays cached for every later count of the session, so an honest large model stops
    being counted where its float64 steps grow dear, and a small one is counted all run."""
    if n <= ABSOLUTE_STEPS:
        return True
    trajectory = seeded_trajectory(ctx, secret)
    began = time.perf_counter()
    for step in range(ABSOLUTE_STEPS, n + BUDGET_STRIDE, BUDGET_STRIDE):
        trajectory.state(min(step, n))
        if time.perf_counter() - began > COUNT_BUDGET_S and step < n:
            return False
    return True


def count_unreadable(ctx: Context, n: int, near: Mapping[int, State],
                     secret: int | None = None) -> str | None:
    """Why no count of steps can be read from parameters at step ``n``, or None if it can:
    each of COMPANIONS second honest runs of the reference (the same steps, rounded
    differently: Reference.companion) must be nearest the reference's step ``n`` of ``near``
    (steps n-1 to n+1) and within COUNT_READABLE steps' length of it. Further, rounding alone
    can carry an honest run half a step along the trajectory, and nearness to a step says
    nothing about the count."""
    opt = ctx.cid.task.optimizer
    assert opt is not None
    steps = _flat_steps(near)
    length = min(float(np.linalg.norm(steps[s] - steps[n])) for s in steps if s != n)
    for salt in range(COMPANIONS):
        run = ctx.reference.companion(opt, ctx.params, ctx.inputs, ctx.dtype, salt, secret)
        other = _flat(run.state(n)[0])
        distance = {s: float(np.linalg.norm(other - v)) for s, v in steps.items()}
        nearest = min(distance, key=lambda s: (distance[s], abs(s - n)))
        lengths = distance[n] / length if length else math.inf
        if nearest != n or lengths > COUNT_READABLE:
            return (f"step {n} not counted from the seeded start: an honest run of the "
                    f"reference rounded differently is {distance[n]:.3g} from its step {n} "
                    f"({lengths:.3g} steps' length, a step being {length:.3g}; nearest step "
                    f"{nearest}): rounding alone moves a run half a step here")
    return None


def _flat(params: Mapping[str, Any]) -> np.ndarray:
    """Every tensor, widened and concatenated in key order: one vector of the parameters."""
    wide = data.widen(params)
    return np.concatenate([np.ravel(wide[k]) for k in sorted(wide)])


def _flat_steps(states: Mapping[int, State]) -> dict[int, np.ndarray]:
    return {step: _flat(params) for step, (params, _) in states.items()}


@dataclass(frozen=True)
class Clock:
    """A pass's timed turns on the parent's clock beside the worker's account of them, which
    assert_clocks_agree judges: one value, replaced by a new one after each turn. A saved run
    keeps it in ``checks.clocks`` under the keys it always had (``to_record``); ``from_record``
    reads those back, older runs' missing keys as those runs' readers did."""

    parent_s: float = 0.0  # the turns' round commands, on the parent's clock
    worker_s: float = 0.0  # the same commands' spans on the worker's clock (slowest rank's)
    timed_s: float = 0.0  # the timed rounds' own seconds, each rank's own summed (the most)
    turns: int = 0
    rounds: int = 0  # rounds run in them, dropped ones too
    commands: int = 0  # Round commands they took (one a round)
    # the worker's clock between the rounds of one command: none since a command holds one
    # round (protocol 7), so nothing judges it; older runs' records keep it
    between_s: float = 0.0
    outside_s: float = 0.0  # the rounds' own readings against the readings around them
    round_work_s: float = 0.0  # the harness's work between two rounds, as the parent does it
    after_s: float = 0.0  # the median full round's CPU after its clock (every rank's most)
    round_median_s: float | None = None  # the median full round's seconds (None: none read)
    after_bounded: bool | None = None  # ``after_s`` judged: a CPU case (None: no turn yet)
    cores_ratio: float | None = None  # the most cores a round used over the case's threads
    held_new: int | None = None  # the most threads and processes a turn held new
    not_judged: str | None = None  # why the clocks were recorded and not judged

    def to_record(self) -> dict[str, Any]:
        """The record's ``checks.clocks`` entry: every reading made (None: not made, left out),
        ``after_bounded`` as the 1.0 or 0.0 a saved run holds."""
        found = {f.name: getattr(self, f.name) for f in fields(self)
                 if getattr(self, f.name) is not None}
        if self.after_bounded is not None:
            found["after_bounded"] = float(self.after_bounded)
        return found

    @classmethod
    def from_record(cls, entry: Mapping[str, Any]) -> Clock:
        """A saved run's ``checks.clocks`` entry; a key an older run lacks reads as its
        readers read it then (no further commands, no gaps between rounds, nothing after)."""
        turns = int(entry.get("turns", 0))
        found = {f.name: entry[f.name] for f in fields(cls) if f.name in entry}
        return cls(**{**found, "turns": turns, "rounds": int(entry.get("rounds", 0)),
                      "commands": int(entry.get("commands", turns)),
                      **({"after_bounded": bool(entry["after_bounded"])}
                         if "after_bounded" in entry else {})})


# the parent's clock against the worker's (case_run.CaseRun.turn): each turn's command as the
# parent timed it, and as the worker's own clock (the one its rounds are timed with) spanned
# it. Honest, they differ by the messages' transport and the threads' move to the timed
# cores, well under a millisecond to a few; a busy host, or the parent's other threads
# holding the GIL (a session that times nothing checks cases side by side), can stall the
# parent's receipt for more. So
# the verdict is over the whole pass and lenient: the worker's account must cover at least
# CLOCK_SHARE of the parent's time, less CLOCK_SLACK_S a turn and COMMAND_SLACK_S for each
# further round command of a turn (a turn is one command a round, so that each round's probe
# keys reach the worker only as the round starts: one message there and back each, which
# only the parent's clock sees)
CLOCK_SHARE = 0.5
CLOCK_SLACK_S = 0.05
COMMAND_SLACK_S = 0.005


def clock_floor(clock: Clock) -> float:
    """The least the worker's clock may show for its round commands (assert_clocks_agree)."""
    further = max(clock.commands - clock.turns, 0)
    return (CLOCK_SHARE * clock.parent_s - CLOCK_SLACK_S * clock.turns
            - COMMAND_SLACK_S * further)


def assert_clocks_agree(clock: Clock, *, where: str) -> None:
    """The worker's clock ran with the parent's: over a pass, the span of its round commands
    on its own clock is at least CLOCK_SHARE of the parent's time for them, less
    CLOCK_SLACK_S a turn, and its timed rounds fit inside that span. A worker whose clock
    was replaced (time.perf_counter, or the attribute the runner reads) to report less
    fails here."""
    parent, worker, timed, turns = clock.parent_s, clock.worker_s, clock.timed_s, clock.turns
    further = max(clock.commands - turns, 0)
    floor = clock_floor(clock)
    if worker < floor:
        commands = (f" and {COMMAND_SLACK_S:g} s for each of {further} further round "
                    "command(s)" if further else "")
        raise AssertionError(
            f"{where}: the worker's clock disagrees with the parent's: its {turns} timed "
            f"turn(s) took {parent:.4g} s on the parent's clock and {worker:.4g} s on the "
            f"worker's, under the {floor:.4g} s allowed ({CLOCK_SHARE:g} of the parent's, "
            f"less {CLOCK_SLACK_S:g} s a turn{commands}): the clock the rounds are timed "
            "with was replaced or slowed")
    assert_rounds_fit(clock, where=where)
    if timed > worker * 1.01 + 1e-4:
        raise AssertionError(
            f"{where}: the worker's timed rounds ({timed:.4g} s) add up to more than the "
            f"turns that held them ({worker:.4g} s) on the same clock: the clock is not "
            "monotonic")


# what the worker's clock may put around a round's own readings: OUTSIDE_SHARE of the parent's
# time (a guard's entry and exit: microseconds), CLOCK_SLACK_S a turn; between two rounds it
# puts nothing since a command holds one round (protocol 7); ROUND_WORK_TIMES the harness's own
# work on a round's results as the parent does it (a digest) is what may follow its clock
ROUND_WORK_TIMES = 4.0
OUTSIDE_SHARE = 0.02


def assert_rounds_fit(clock: Clock, *, where: str) -> None:
    """A clock consistent with itself but moving time out of the rounds fails: each round's
    reported seconds match the readings the worker took around it (one clock read by every
    caller alike)."""
    parent, turns, outside = clock.parent_s, clock.turns, clock.outside_s
    if abs(outside) > OUTSIDE_SHARE * parent + CLOCK_SLACK_S * turns:
        raise AssertionError(
            f"{where}: the worker's rounds were timed at {abs(outside):.4g} s more or less "
            f"than its readings around them show ({parent:.4g} s on the parent's clock): the "
            "clock the rounds are timed with is not the one around them")
    assert_after_fits(clock, where=where)


# what the worker's clock may put after a round's clock (its results' host copies and
# digests), judged on the median round (a preempted copy on a busy host moves one round, work
# moved there every round): ROUND_WORK_TIMES the parent's own digest of a round's results,
# plus AFTER_SHARE of the median round's own time and AFTER_SLACK_S. An honest CPU round's
# copies and digest cost about twice the parent's digest
AFTER_SHARE = 0.10
AFTER_SLACK_S = 0.001


def after_allowed(clock: Clock) -> float:
    """The CPU the worker may spend after a median round's clock (assert_after_fits)."""
    return (ROUND_WORK_TIMES * clock.round_work_s + AFTER_SLACK_S
            + AFTER_SHARE * (clock.round_median_s or 0.0))


def assert_after_fits(clock: Clock, *, where: str) -> None:
    """Work moved after a round's clock shows (the worker's CPU time there, every thread's,
    which a busy host's preemption does not inflate): a result that is the framework's own
    synchronised array owes no work, so what the worker does between a round's clock and
    its reply is the harness's (copies to the host, digests), bounded here by what the
    parent's digest of the same results costs. A result finished late (a thread still
    writing the arrays, the copy hooked to do the step's rest) fails. Judged where the
    parent can replicate that work: a case on the CPU (``after_bounded``)."""
    after, round_s = clock.after_s, clock.round_median_s
    if not judged_after(clock) or round_s is None:
        return
    allowed = after_allowed(clock)
    if after > allowed:
        raise AssertionError(
            f"{where}: the worker spent {after:.4g} s of CPU after a median timed round's clock "
            f"had stopped, where copying and digesting its results allows {allowed:.4g} s (the "
            f"round took {round_s:.4g} s): work was moved after the clock (a result is done "
            "when the framework's sync returns; nothing may finish it later)")


def judged_after(clock: Clock) -> bool:
    """Whether assert_after_fits judges ``clock``: a CPU case whose full rounds' work after
    their clock was read."""
    return bool(clock.after_bounded) and clock.round_median_s is not None
