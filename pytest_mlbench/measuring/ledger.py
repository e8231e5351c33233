"""What a case's rounds did in one pass, as the parent recorded them.

measuring/case_run.py drives the rounds (the keys they are sent are
measuring/key_schedule.py's); the ledger keeps each round's worker serial and result digest
(its fetch and digest check read them), the calls each timed round made, the recorded rounds
(``RecordedRound``: seconds scaled to the shape's steps_per_call calls), each full round's
seconds and CPU after its clock, and the clock readings of the pass's turns: one
audit.Clock, replaced by a new one after each turn, which the audit judges and the record
keeps (``checks.clocks``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pytest_mlbench.checking import audit
from pytest_mlbench.engine import protocol as p


@dataclass(frozen=True)
class RecordedRound:
    """One recorded timed round: its seconds (the slowest rank's), the cycle of the pass's
    timed phase it ran in, its page faults (the most of any rank)."""

    seconds: float
    cycle: int
    faults: int


@dataclass(frozen=True)
class PassTiming:
    """A pass's recorded rounds, and the page faults per timed step over them."""

    rounds: tuple[RecordedRound, ...]
    faults_per_step: float
    calls: int = 0  # calls a round made (the calibrated count; rounds are recorded per
    # steps_per_call calls)
    bare_step_s: float | None = None  # the bare loop's seconds a step (None: not run)


@dataclass
class RoundLedger:
    """One case's rounds in one pass: what the worker said of each, what was recorded, and
    the pass's clock (``clock``)."""

    serial_of: dict[int, int] = field(default_factory=dict)  # round number -> worker serial
    digests: dict[int, Any] = field(default_factory=dict)  # round number -> result digest
    round_calls: dict[int, int] = field(default_factory=dict)  # timed round -> its calls
    recorded: list[RecordedRound] = field(default_factory=list)
    afters: list[float] = field(default_factory=list)  # each full round's CPU after its clock
    round_seconds: list[float] = field(default_factory=list)  # each full round's seconds
    rounds_done: int = 0  # timed rounds run (dropped ones too)
    clock: audit.Clock = field(default_factory=audit.Clock)

    @property
    def seconds(self) -> list[float]:
        """Every recorded round's seconds, in order."""
        return [r.seconds for r in self.recorded]

    def ran(self, r: int, reply: p.RoundRan) -> None:
        """What the worker said of round ``r``: its serial for it, its digest."""
        self.serial_of[r] = reply.serial
        self.digests[r] = reply.digest

    def clocked(self, took: float, parts: Sequence[Sequence[p.RoundRan]],
                seconds: Sequence[float], *, discard: int = 0, bounded: bool = True) -> None:
        """A turn on the parent's clock (``took``) beside the worker's account of it
        (``parts``: each round's replies, one a rank; each round a Round command, a message
        there and back) and its rounds' ``seconds`` (the slowest rank's), the first
        ``discard`` dropped; ``bounded``: its work after a round's clock is judged (a CPU
        case, audit.assert_after_fits)."""
        ranks = list(zip(*parts, strict=True))
        clock = self.clock
        # per round, the slowest rank's: the rounds' own seconds and the work after them
        afters = [[r.after for r in part] for part in parts]
        if all(a is not None for part in afters for a in part):
            # full rounds only: a dropped round's one call leaves one call's work after it
            self.afters += [max(float(a or 0.0) for a in part) for part in afters][discard:]
            self.round_seconds += list(seconds[discard:])
            clock = replace(clock, after_s=float(np.median(self.afters)),
                            round_median_s=float(np.median(self.round_seconds)))
        self.clock = replace(
            clock, commands=clock.commands + len(parts), parent_s=clock.parent_s + took,
            worker_s=clock.worker_s + max(sum(float(r.span) for r in rank) for rank in ranks),
            # each worker's own rounds, which fit its own span: the rounds' maxima over a
            # parallel case's ranks (``seconds``) may add up to more than any one rank's span
            # when the ranks enter their rounds a little apart (a dp-w2 case on a busy host
            # summed 0.2218 s of maxima against 0.2093 s of span, read as a clock going back)
            timed_s=clock.timed_s + max(sum(float(r.seconds) for r in rank) for rank in ranks),
            turns=clock.turns + 1, rounds=clock.rounds + len(seconds),
            outside_s=clock.outside_s + max(sum(float(r.outside) for r in rank)
                                            for rank in ranks),
            after_bounded=bounded)

    def cores(self, ratio: float, held: int) -> None:
        """A turn's largest ratio of cores used to the case's threads, and the most threads
        and processes its workers held new (checking/cores.py): the pass's most, kept."""
        clock = self.clock
        self.clock = replace(clock, cores_ratio=max(clock.cores_ratio or 0.0, ratio),
                             held_new=max(clock.held_new or 0, held))

    def round_work(self, work: float) -> None:
        """The harness's own work between two rounds as the parent did it (the most)."""
        self.clock = replace(self.clock, round_work_s=max(self.clock.round_work_s, work))

    def not_judged(self, why: str) -> None:
        self.clock = replace(self.clock, not_judged=why)

    def record(self, seconds: Sequence[float], faults: Sequence[int], *, discard: int,
               cycle: int, scale: float) -> None:
        """A turn's rounds after the first ``discard``, recorded at ``scale`` (the shape's
        steps_per_call calls over the calls a round made), in ``cycle``; every one counted."""
        self.recorded += [RecordedRound(s * scale, cycle, f)
                          for s, f in zip(seconds[discard:], faults[discard:], strict=True)]
        self.rounds_done += len(seconds)

    def timing(self, calls: int, bare_s: Sequence[float]) -> PassTiming | None:
        """The pass's recorded rounds of ``calls`` calls each, if any, with the bare loop's
        median seconds a call."""
        if not self.recorded:
            return None
        steps = len(self.recorded) * calls
        faults = sum(r.faults for r in self.recorded)
        bare = float(np.median(bare_s)) if bare_s else None
        return PassTiming(tuple(self.recorded), faults / steps if steps else 0.0, calls, bare)
