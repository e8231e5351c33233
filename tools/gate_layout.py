"""For tools/gate_power.py (issue 52): the rounds a saved run's cases would record in each
process, and in which cycles, under another plan (``--benchmark-max-time``,
``--benchmark-min-rounds``, the cycles a pass has), laid out by measuring/schedule.py as the
campaign does; what those rounds cost a pass; and how a case's rounds spread per round, per
turn and per process.

A recorded case says what its rounds cost: a process that recorded more than the floor's
rounds was given them by the max-time (schedule.rounds_per_process: its budget over its
round, rounded up), so its round is taken as that budget over its count less a half; a
process at the floor says only that its round cost at least the budget over the floor, and
its rounds' median (seconds of a round's calls) is taken where larger. A turn records at
least schedule.turn_rounds(calls, DROPPED_CALLS) rounds: two where one call is a round (the
code now; the committed baseline was recorded before, one round a turn everywhere).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_mlbench.measuring import schedule
from pytest_mlbench.measuring.case_run import DROPPED_CALLS
from pytest_mlbench.storing.record import Measure


@dataclass(frozen=True)
class Plan:
    """What decides a case's rounds in a process: the gate command's options."""

    processes: int
    max_time: float  # --benchmark-max-time
    min_rounds: int = 5  # --benchmark-min-rounds (pytest-benchmark's default)
    cycles: int = schedule.CYCLES  # a pass's interleaving cycles (a constant of the code)

    def floor(self) -> int:
        """schedule.rounds_per_process's floor, with this plan's cycles: one round a cycle."""
        return max(self.cycles, math.ceil(self.min_rounds / self.processes))


def asked(recorded: Plan, processes: int, max_time: float | None, min_rounds: int | None,
          cycles: int | None) -> Plan | None:
    """The plan gate_power's ``--max-time``, ``--min-rounds`` and ``--cycles`` ask for (the
    run's where not given), or None (none given: the rounds in the cycles the run recorded)."""
    if max_time is None and min_rounds is None and cycles is None:
        return None
    return Plan(processes, recorded.max_time if max_time is None else max_time,
                recorded.min_rounds if min_rounds is None else min_rounds,
                cycles or schedule.CYCLES)


def layout_line(costs: Sequence[Cost], recorded: Plan, plan: Plan | None,
                processes: int) -> str:
    """What a pass (one process, one side) spends on timed rounds under ``plan``, beside the
    run's plan laid out by the code now."""
    run = Plan(processes, recorded.max_time, recorded.min_rounds)
    now = f"the run's plan laid out by the code now: {pass_cost(costs, run).line()}"
    if plan is None:
        return f"rounds laid out: the cycles the run recorded ({now})"
    return (f"rounds laid out: max-time {plan.max_time:g} s, min-rounds {plan.min_rounds}, "
            f"{plan.cycles} cycles; a pass's timed rounds {pass_cost(costs, plan).line()} ({now})")


def recorded_plan(path: Path, processes: int) -> Plan:
    """The plan a saved run was recorded with: its benchmarks' max-time and min-rounds
    (pytest-benchmark's options, saved with each), at ``processes`` a case."""
    options = [b.get("options", {}) for b in json.loads(path.read_text()).get("benchmarks", [])]
    options = [o for o in options if "max_time" in o] or [{"max_time": 0.5}]
    return Plan(processes, float(options[0]["max_time"]), int(options[0].get("min_rounds", 5)))


@dataclass(frozen=True)
class Cost:
    """Seconds a case's rounds cost in one process."""

    round_s: float  # one recorded round
    calls: int  # calls a round makes (the fewest over the processes)


def cost_of(m: Measure, recorded: Plan) -> Cost:
    """A recorded case's round, as the schedule that recorded it saw it (module docstring)."""
    budget = recorded.max_time / recorded.processes
    found = []
    for i, rounds in enumerate(m.passes):
        calls = m.calls_per_round[i] if i < len(m.calls_per_round) else m.steps_per_call
        if len(rounds) > recorded.floor():
            found.append(budget / (len(rounds) - 0.5))
        else:
            found.append(max(float(np.median(rounds)) * calls / m.steps_per_call,
                             budget / recorded.floor()))
    calls = min(m.calls_per_round) if m.calls_per_round else m.steps_per_call
    return Cost(float(np.median(found)), int(calls))


def labels(cost: Cost, plan: Plan) -> np.ndarray:
    """Each recorded round's cycle in one process under ``plan``, laid out as campaign's
    _interleave does (schedule.rounds_per_process, turn_rounds and turns)."""
    rounds = max(plan.floor(), math.ceil(plan.max_time / plan.processes / cost.round_s))
    counts = schedule.turns(rounds, plan.cycles,
                            per_turn=schedule.turn_rounds(cost.calls, DROPPED_CALLS))
    return np.repeat(np.arange(plan.cycles), counts)


@dataclass(frozen=True)
class PassCost:
    """What one process (of one side) spends on the timed rounds of every case."""

    recorded: float  # seconds of the recorded rounds
    dropped: float  # seconds of each turn's dropped calls (DROPPED_CALLS, at a call's cost)
    turns: int  # each also a switch of workers, whose cost the run does not record
    audits: int  # audited rounds, each replaying a round

    def line(self) -> str:
        return (f"{self.recorded:.1f} s recorded, {self.dropped:.1f} s dropped, {self.turns} "
                f"turns, {self.audits} audited rounds")


def pass_cost(costs: Sequence[Cost], plan: Plan) -> PassCost:
    """Every case's timed rounds in one process under ``plan`` (labels)."""
    recorded = dropped = 0.0
    turns = audits = 0
    for cost in costs:
        found = labels(cost, plan)
        count = len(np.unique(found))
        recorded += len(found) * cost.round_s
        dropped += count * cost.round_s * DROPPED_CALLS / cost.calls
        turns += count
        audits += 1 + len(found) // schedule.AUDIT_EVERY
    return PassCost(recorded, dropped, turns, audits)


# -- where a case's spread lives ---------------------------------------------------------------

@dataclass(frozen=True)
class Parts:
    """Variance of a case's log rounds, by where it arises (method of moments, nested: rounds
    in a turn, turns in a process, processes), summed over the cases measured."""

    round: float  # two rounds of one turn, run back to back
    turn: float  # a turn's mean beyond its rounds'
    process: float  # a process's mean beyond its turns'
    cases: int
    split: int  # of them, those where a turn of two rounds or more told round from turn

    def shares(self) -> tuple[float, float, float]:
        """Each part over their sum, a part below zero (noise about none) taken as none."""
        parts = np.maximum([self.round, self.turn, self.process], 0.0)
        return tuple(float(x) for x in parts / parts.sum())  # type: ignore[return-value]


def spread_parts(logs: Sequence[Sequence[np.ndarray]], cycles: Sequence[Sequence[np.ndarray]],
                 split_only: bool = False) -> Parts:
    """Over the cases whose every process has two turns or more, each case's variance of its
    log rounds per round, per turn and per process, summed (unbiased each, so a case's may be
    below zero). Where no turn of a case holds two rounds, its rounds' part cannot be told from
    its turns' and is counted with them (``Parts.split``: the cases where it could), or the
    case is left out (``split_only``)."""
    total = np.zeros(3)
    cases = split = 0
    for case_logs, case_cycles in zip(logs, cycles, strict=True):
        found = _case_parts(case_logs, case_cycles)
        if found is not None and (found[0] or not split_only):
            total += found
            cases += 1
            split += bool(found[0])
    return Parts(*map(float, total), cases, split)


def _case_parts(logs: Sequence[np.ndarray], cycles: Sequence[np.ndarray]) -> np.ndarray | None:
    turns = [[x[c == k] for k in np.unique(c)] for x, c in zip(logs, cycles, strict=True)]
    pairs = [t for process in turns for t in process if len(t) >= 2]
    if len(turns) < 2 or min(len(p) for p in turns) < 2:
        return None
    round_var = (sum(float(((t - t.mean()) ** 2).sum()) for t in pairs)
                 / sum(len(t) - 1 for t in pairs)) if pairs else 0.0
    inverse = np.mean([1 / len(t) for process in turns for t in process])
    means = [np.array([t.mean() for t in process]) for process in turns]
    turn_var = np.mean([m.var(ddof=1) for m in means]) - round_var * inverse
    per_process = np.mean([1 / len(m) for m in means])
    process_var = (np.var([m.mean() for m in means], ddof=1)
                   - (turn_var + round_var * inverse) * per_process)
    return np.array([round_var, turn_var, process_var])


def parts_line(parts: Parts, own: Parts) -> str:
    """Where the spread lives (spread_parts), with and without the groups' pass effects
    (less_pass_effects: the second's process part is what a side's process adds of its own,
    which the two sides of an A/B pass do not share)."""
    r, t, p = parts.shares()
    mean = own.process / own.cases
    return (f"over the {parts.cases} cases whose turns hold two rounds or more, a round's log "
            f"variance is {r:.0%} per round, {t:.0%} per turn, {p:.0%} per process; less the "
            f"groups' pass effects, a process's own variance (the mean over {own.cases} cases) "
            f"is {mean:+.5f}, sd {math.copysign(math.sqrt(abs(mean)), mean):+.1%}")


def less_pass_effects(logs: Sequence[Sequence[np.ndarray]],
                      groups: np.ndarray) -> list[list[np.ndarray]]:
    """Each case's log rounds less its comparison group's pass effect (the mean over the
    group's cases of their process means' deviations, pass by pass): what moved every case of
    the group in a pass (the host, while the pass ran, which the two sides of an A/B pass
    share) taken away, so what stays per process is the case's own. A case's own deviation
    is a k-th of the effect it is taken from; the deviations are scaled back by k / (k - 1).
    Groups of one case, or of unequal process counts, are left as they are."""
    out = [list(x) for x in logs]
    for g in np.unique(groups):
        members = [int(c) for c in np.flatnonzero(groups == g)]
        if len(members) < 2 or len({len(logs[c]) for c in members}) > 1:
            continue
        means = np.array([[p.mean() for p in logs[c]] for c in members])
        dev = means - means.mean(axis=1, keepdims=True)
        effect = dev.mean(axis=0)
        scale = math.sqrt(len(members) / (len(members) - 1))
        for c, d in zip(members, dev, strict=True):
            out[c] = [p - p.mean() + (d[i] - effect[i]) * scale for i, p in enumerate(logs[c])]
    return out
