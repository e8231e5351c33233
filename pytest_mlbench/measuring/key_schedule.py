"""Which keys each round of a case's pass is sent, drawn from secrets only the parent holds.

Inference and transforms: each call's probe key, drawn from the pass's audit secret
(``KeySchedule.secret``, one a case and pass). Training: each step's batch key
(data.step_key), from the pass's data secret, counted from the seeded start, so that every
case of a pass trains on the same batches and shares one reference trajectory. A key is sent
with the round it is for (a timed turn is one Round command a round), so no probe or batch,
and no answer to one, can exist in the worker before the round starts. The secrets are never
sent: the audit secret also draws which call of an audited round is judged and which round a
turn without an audit fetches as a decoy (measuring/case_run.py). What each round was sent is
kept for its audit, with the steps a bare loop made just before it (training: the audit
replays them from the round before)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from pytest_mlbench.workloads import data
from pytest_mlbench.workloads.case import CaseId


class AuditKeys(NamedTuple):
    """What an audited round is judged against: the call judged (None: training, the state
    the round left), that call's probe key, the batch keys of the steps replayed from the
    round before (None: not training), and how many calls or steps the round made."""

    call: int | None
    key: int | None
    batches: list[int] | None
    calls: int


@dataclass
class KeySchedule:
    """The keys of one case's rounds in one pass, and the parent's draws that choose them."""

    name: str  # the case's (CaseSpec.name): the label of every draw
    cid: CaseId
    # the parent's secret for this case in this pass: which rounds it audits, which call of
    # an audited round, every timed call's probe key. Never sent to the worker; recorded
    # after the run (CaseRun.finish) so the run's audits can be judged again
    secret: int = field(default_factory=lambda: secrets.randbits(63))
    # training: the pass's data secret (the campaign's, one for every case of the pass);
    # like ``secret`` never sent to a worker, only each round's steps' keys
    data_secret: int = field(default_factory=lambda: secrets.randbits(63))
    sent: int = 0  # rounds and bare loops asked of the worker so far: the probes' index
    steps_sent: int = 0  # training steps whose batch keys the worker was sent (or checked)
    keys: dict[int, list[int]] = field(default_factory=dict)  # round -> the keys it was sent
    # training: the batch keys of the bare loop's steps made since the last round, and, by
    # round, those made just before it (its audit replays them from the round before it)
    pending_bare: list[int] = field(default_factory=list)
    bare_before: dict[int, list[int]] = field(default_factory=dict)

    @property
    def train(self) -> bool:
        return self.cid.task.kind == "train"

    def round_keys(self, calls: int) -> list[int]:
        """Each call's key for the next round of ``calls`` calls (a probe's, or a step's
        batch's)."""
        self.sent += 1
        if self.train:
            return self._steps(calls)
        rng = data.generator(self.secret, self.name, "probe", str(self.sent))
        return [int(k) for k in rng.integers(1, 2**62, calls)]

    def bare_keys(self, calls: int) -> list[int]:
        """Each call's key for a bare loop of ``calls`` calls, drawn as a round's are
        (training: the next steps' batch keys, which the worker counts as steps, and which
        the next round's audit replays)."""
        if self.train:
            keys = self._steps(calls)
            self.pending_bare += keys
            return keys
        self.sent += 1
        rng = data.generator(self.secret, self.name, "bare", str(self.sent))
        return [int(k) for k in rng.integers(1, 2**62, calls)]

    def _steps(self, calls: int) -> list[int]:
        first = self.steps_sent + 1
        self.steps_sent += calls
        cid = self.cid
        return [data.step_key(self.data_secret, cid.workload, cid.shape, n)
                for n in range(first, self.steps_sent + 1)]

    def ran(self, r: int, keys: list[int]) -> None:
        """Round ``r`` ran on ``keys``, after the steps of any bare loop since the last round."""
        if self.pending_bare:
            self.bare_before[r], self.pending_bare = self.pending_bare, []
        self.keys[r] = keys

    def audit_call(self, r: int, calls: int) -> int | None:
        """Training audits the state a round leaves; other kinds one call's output of the
        ``calls`` round ``r`` made, chosen from the parent's secret, after the round ran."""
        if self.train:
            return None
        rng = data.generator(self.secret, self.name, "audit-call", str(r))
        return int(rng.integers(0, calls))

    def audited(self, r: int, calls: int) -> AuditKeys:
        """What round ``r`` (of ``calls`` calls) is judged against (audit.audit)."""
        call = self.audit_call(r, calls)
        extra = self.bare_before.get(r, [])  # a bare loop's steps since round r - 1
        return AuditKeys(call, None if call is None else self.keys[r][call],
                         [*extra, *self.keys[r]] if self.train and r in self.keys else None,
                         calls + len(extra))

    def decoy(self, numbers: Sequence[int]) -> int:
        """The round a turn of rounds ``numbers`` without an audited one fetches all the same."""
        rng = data.generator(self.secret, self.name, "decoy", str(numbers[0]))
        return int(rng.choice(numbers))
