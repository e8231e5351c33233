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


def turns(rounds: int, cycles: int = CYCLES) -> list[int]:
    """A pass's rounds shared out over its turns as evenly as can be (8 rounds: 1, 1, 2, 1, 1
    and 2; never 3, 3 and 2), one turn a cycle from the first, one round a turn at least."""
    count = min(cycles, max(1, rounds))
    return [rounds * (k + 1) // count - rounds * k // count for k in range(count)]


def cycle_order(seed: int, p: int, cycle: int, cases: int) -> np.ndarray:
    """The order the cases take their turns in, in one cycle of pass ``p`` (seeded)."""
    return data.generator(seed, "cycle", str(p), str(cycle)).permutation(cases)


def recorded_numbers(counts: Sequence[int], discard: int) -> list[int]:
    """The numbers (from 1) of a pass's recorded rounds, where each turn runs ``discard``
    dropped rounds and then its count of recorded ones (``turns``)."""
    found, first = [], 1
    for count in counts:
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
