"""How a pass's timed phase is laid out: a case's rounds in one process, those rounds shared
out over the interleaving cycles, the order of the cases in a cycle, and which rounds are
audited. Pure functions of the plan, the seed and (which rounds are audited) the parent's
secret for the case, recorded after the run: a replayed session lays out the same."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pytest_mlbench.workloads import data

# interleaving cycles per pass: each case takes a turn in every cycle, its rounds shared out
# evenly, one recorded round a turn at least (after the turn's dropped one); even, so that the
# two sides of an A/B pair go first equally often (ABAB..., then BABA...). A turn is a moment of
# the host, whose speed drifts within a pass (on the 2-core reference machine one case's turns
# within a pass by up to 15%, cache-bound compiled steps the most), and a case whose rounds
# all fell in one turn carried that moment into its figure (vit's torch-jit, three rounds in
# one turn: 5-6% between processes; in six turns: 2%, docs/GATE.md). Every turn costs a
# dropped round (one call) and a move of the threads.
CYCLES = 6
MIN_ROUNDS_PER_PROCESS = CYCLES  # one round in every cycle: a process's figure is the median
AUDIT_EVERY = 50  # one audited round, and one more per this many
# a turn's dropped call (the first after the worker resumed: cold caches) at most this share
# of the rounds the turn records (turn_rounds). Measured on the main job (4b451ca, three
# processes): where one call is a whole round (a step of 15-380 ms), the first call after
# resuming read 1.8% slower than the next (median of 29 cases; lstm's torch steps 7-8%), a
# short step's 1.05-1.7 times; so the call is still dropped, and such a case's turns record
# two rounds each, in half as many turns (dropped 0.5 of recorded, not 1)
DROPPED_SHARE = 0.5


def rounds_per_process(fixed: int | None, round_s: float, processes: int, max_time: float,
                       min_rounds: int) -> int:
    """Recorded rounds of one case in one process: a shape's fixed count, or
    ``--benchmark-max-time`` and ``--benchmark-min-rounds`` shared out over the processes,
    and at least MIN_ROUNDS_PER_PROCESS, one in every cycle (a process's figure is the median
    of rounds taken at six moments of its pass: neither one odd round nor one slow moment of
    the host moves it). More rounds in a process narrow nothing that matters: the spread that
    repeats from run to run lives between processes and between moments."""
    if fixed:
        return max(1, math.ceil(fixed / processes))
    floor = max(MIN_ROUNDS_PER_PROCESS, math.ceil(min_rounds / processes))
    return max(floor, math.ceil(max_time / processes / max(round_s, 1e-6)))


def turns(rounds: int, cycles: int = CYCLES, per_turn: int = 1) -> list[int]:
    """A pass's rounds shared out over its turns as evenly as can be (8 rounds: 1, 1, 2, 1, 1
    and 2; never 3, 3 and 2), each at least ``per_turn`` rounds (``turn_rounds``), one turn
    a cycle; where there are fewer turns than cycles they are spread over the pass (a zero:
    a cycle without the case's turn; 6 rounds of 2 a turn: 2, 0, 2, 0, 2 and 0)."""
    count = min(cycles, max(1, rounds // max(per_turn, 1)))
    shares = [rounds * (k + 1) // count - rounds * k // count for k in range(count)]
    found = [0] * cycles
    for k, share in enumerate(shares):
        found[k * cycles // count] = share
    return found


def turn_rounds(calls: int, dropped_calls: int) -> int:
    """The fewest recorded rounds a turn makes, so that its dropped calls (``dropped_calls``,
    the cold first after the worker resumed) cost at most DROPPED_SHARE of them, a round
    being ``calls`` calls: one round of many calls, two where one call is a whole round."""
    return max(1, math.ceil(dropped_calls / (DROPPED_SHARE * max(calls, 1))))


def cycle_order(seed: int, p: int, cycle: int, cases: int) -> np.ndarray:
    """The order the cases take their turns in, in one cycle of pass ``p`` (seeded)."""
    return data.generator(seed, "cycle", str(p), str(cycle)).permutation(cases)


def recorded_numbers(counts: Sequence[int], discard: int) -> list[int]:
    """The numbers (from 1) of a pass's recorded rounds, where each turn runs ``discard``
    dropped rounds and then its count of recorded ones (``turns``)."""
    found, first = [], 1
    for count in counts:
        if count <= 0:  # a cycle without the case's turn (``turns``)
            continue
        found += range(first + discard, first + discard + count)
        first += discard + count
    return found


def audited_rounds(secret: int, name: str, p: int, among: Sequence[int]) -> set[int]:
    """Which of a pass's rounds ``among`` (its recorded ones, recorded_numbers) are audited:
    drawn from the parent's secret for the case and pass (key_schedule.KeySchedule.secret,
    never sent to a worker, recorded after the run), so an implementation cannot tell them
    from the others, not even by computing them from the session's seed. Never a turn's
    dropped round: it is one call after the worker resumed, which the worker can tell from
    the rest (an implementation honest there and nowhere else met an audit there half the
    time: tests/cheats/aheadinfer)."""
    rng = data.generator(secret, name, "audit", str(p))
    count = min(len(among), 1 + len(among) // AUDIT_EVERY)
    return {int(r) for r in rng.choice(list(among), count, replace=False)}
