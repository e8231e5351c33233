"""One case in one pass, from the parent: prepare (build, check), timed turns, finish.

Every case, single-device or data-parallel, of every kind, goes through this one path; its
worker pool answers the same commands whether it has one rank or several. The checks
themselves are in verify.py (audit.py while timed), the references in reference.py.

Every pass runs the same checks before timing, in a fresh process, against references the
first pass computed (they are cached): every framework traces and compiles the same
functions in the same order in every process (torch and numba load from the session's
compile caches what the first pass compiled; XLA compiles afresh: engine/workers.
compile_caches). Every pass's timed rounds are audited.
The first pass also measures the peak memory and checks loss and gradient where training
took the parameters; later passes skip those two, which only repeat the first pass's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_mlbench import audit, data, verify
from pytest_mlbench.checks import assert_identical, assert_threads
from pytest_mlbench.engine.workers import FrameworkPool

WARMUP = 0  # round 0 is a warm-up: it runs like every other round and is never recorded
TURN_WARMUP = 1  # rounds each timed turn runs first and drops (the worker was just resumed)
CALL_MIN_S = 120.0  # a timed turn's timeout is 20 times what it should take, at least this


@dataclass
class CaseRun:
    ctx: verify.Context
    pool: FrameworkPool
    spec: dict[str, Any]
    calls: int  # steps (or calls) per timed round
    audits: set[int] = field(default_factory=set)  # timed round numbers to audit
    handle: int | None = None
    round_s: float = 0.0  # the warm-up round's duration: what a round costs
    checked_step_s: list[float] = field(default_factory=list)
    compile_s: float | None = None
    kept: dict[int, Any] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    rounds_done: int = 0
    pinned: dict[str, Any] = field(default_factory=dict)
    faults: list[int] = field(default_factory=list)  # page faults of each recorded round
    heap: dict[str, Any] = field(default_factory=dict)  # the pre-touch (allocator.pretouch)
    full: bool = True  # the first pass: peak memory and the re-check after training too

    @property
    def train(self) -> bool:
        return self.ctx.cid.task.kind == "train"

    def _call(self, method: str, *args: Any) -> Any:
        assert self.handle is not None
        return agree(self.pool.case(self.handle, method, *args), self.ctx.where)

    # -- before timing ----------------------------------------------------------------------

    def prepare(self, threads: int, pin: bool, pretouch: bool = False) -> None:
        """Build in the worker, then every check that comes before timing; ``pretouch``
        (a timed session): then the worker's heap is faulted in (engine/allocator.py)."""
        self.handle = self.pool.open(self.spec)
        for info in self.pool.info:
            assert_threads(info["threads"], self.expected_threads(), where=self.ctx.where)
        verify.check_start(self.ctx, self._call("start"))
        if self.train:
            self._prepare_train()
        else:
            verify.check_output(self.ctx, self._call("evaluate", 0), 0, "for the first probe")
        # two warm-up rounds (never recorded): the faster says what a round costs; the
        # state the second leaves is where timed round 1 starts
        times = []
        # "learn" (when pinning) also finds the threads that worked and pins them
        for first in ((("learn", True),) if pin else (("round",),)) + (("round",),):
            warm = self._call(*first, WARMUP, 1, self.calls, {WARMUP: self._keep_call(WARMUP)})
            times.append(float(warm["seconds"][0]))
            self.kept.update(warm["kept"])
        self.round_s = min(times)
        if pretouch:
            self.heap = self._call("pretouch")
        self.compile_s = float(self._call("compiled_seconds"))
        self.pinned = self.pool.pool.call("info")[0]["pinned"] if self.pool.pool else {}

    def expected_threads(self) -> int:
        """Threads each worker of this case's pool must have (FrameworkPool's rule)."""
        return self.pool.per_worker_threads(self.pool_world())

    def pool_world(self) -> int:
        return len(self.pool.info) or 1

    def _prepare_train(self) -> None:
        ctx = self.ctx
        verify.check_gradient(ctx, self._call("evaluate", 0))
        first = self._call("steps", 1)
        steps = ctx.cid.workload.check_steps
        rest = self._call("steps", steps - 1) if steps > 1 else None
        verify.check_steps(ctx, first, rest)
        self.checked_step_s = list(first["times"]) + list(rest["times"] if rest else [])

    def _keep_call(self, round_no: int) -> int | None:
        """Training keeps the state a round leaves; other kinds one call's output, chosen
        from the round number (seeded) so the implementation cannot tell which."""
        if self.train:
            return None
        rng = data.generator(self.ctx.reference.seed, self.spec["name"], "audit-call",
                             str(round_no))
        return int(rng.integers(0, self.calls))

    # -- timed ------------------------------------------------------------------------------

    def turn(self, rounds: int, discard: int = TURN_WARMUP) -> list[float]:
        """The next ``rounds`` recorded rounds after ``discard`` more run first and dropped
        (the first round after the worker resumes from SIGSTOP pays for cold caches and the
        other workers' traces); returns the recorded seconds (the slowest rank's). Discarded
        rounds are numbered, run and may be audited like any other."""
        first = self.rounds_done + 1
        total = rounds + discard
        wanted = range(first, first + total)
        keep: dict[int, int | None] = {}
        for r in self.audits:
            if r in wanted:
                keep[r] = self._keep_call(r)
            if self.train and r - 1 in wanted:
                keep[r - 1] = None
        assert self.handle is not None
        # a turn may take what its rounds should take, many times over, but not for ever
        expected = self.round_s * total
        reply = self.pool.case(self.handle, "round", first, total, self.calls, keep,
                               timeout=max(CALL_MIN_S, 20 * expected))
        seconds = [max(col) for col in zip(*(r["seconds"] for r in reply), strict=True)]
        faults = [max(col) for col in zip(*(r.get("faults") or [0] * total for r in reply),
                                          strict=True)]
        self.kept.update(agree_kept(reply, self.ctx.where))
        self._pretouched_again([r["pretouched"] for r in reply if r.get("pretouched")])
        self.seconds += seconds[discard:]
        self.faults += faults[discard:]
        self.rounds_done += total
        return seconds[discard:]

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

    def finish(self) -> dict[str, Any]:
        """Audits, then the checks of what timing left behind; the facts for the record."""
        uncounted = []  # rounds whose count from the start could not be read (audit.py)
        for r in sorted(self.audits):
            if r <= self.rounds_done:
                before = self.kept.get(r - 1)
                if audit.audit(self.ctx, r, self.calls, before, self.kept[r],
                                self._keep_call(r)):
                    uncounted.append(r)
        memory = self._call("peak_memory") if self.full else None
        done = self._call("finish", self.full)
        verify.check_finish(self.ctx, done)
        self.compile_s = done["compile_s"]
        return {"compiles": done["compiles"], "census": done["census"],
                "audited_rounds": sorted(r for r in self.audits if r <= self.rounds_done),
                "uncounted_rounds": uncounted,
                "peak_memory": memory}

    def close(self) -> None:
        if self.handle is not None:
            try:
                self.pool.close_case(self.handle)
            finally:
                self.handle = None


def agree(values: Sequence[Any], where: str) -> Any:
    """One value from a pool's ranks. Parameters, states and gradients must be identical on
    every rank (a broken reduction lets replicas drift); losses are each rank's shard mean,
    averaged (equal shards: the global mean); times are the slowest rank's."""
    first = values[0]
    if len(values) == 1 or not isinstance(first, Mapping):
        return first
    for rank, other in enumerate(values[1:], start=1):
        _same(first, other, f"{where} rank {rank} vs rank 0")
    out = dict(first)
    if "losses" in first:
        out["losses"] = list(np.mean([v["losses"] for v in values], axis=0))
        out["times"] = list(np.max([v["times"] for v in values], axis=0))
    if "loss" in first:
        out["loss"] = np.mean([v["loss"] for v in values])
    if isinstance(first.get("trained"), Mapping):
        out["trained"] = agree([v["trained"] for v in values], f"{where} after timing")
    return out


def _same(a: Mapping[str, Any], b: Mapping[str, Any], where: str) -> None:
    for key in ("snapshot", "grads"):
        if key in a:
            x, y = a[key], b[key]
            if key == "snapshot":
                assert_identical(y["params"], x["params"], where=f"{where} params")
            else:
                assert_identical(y, x, where=f"{where} gradients")


def agree_kept(replies: Sequence[Mapping[str, Any]], where: str) -> dict[int, Any]:
    kept = dict(replies[0]["kept"])
    for rank, reply in enumerate(replies[1:], start=1):
        for r, snap in reply["kept"].items():
            if isinstance(snap, Mapping) and "params" in snap:
                assert_identical(snap["params"], kept[r]["params"],
                                 where=f"{where} rank {rank} vs rank 0 after timed round {r}")
    return kept
