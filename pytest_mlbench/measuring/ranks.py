"""One reply from a pool's ranks: a data-parallel case's workers answer every command alike,
and the parent agrees their replies into one (measuring/case_run.py asks through ``agree``),
failing the case where the ranks' parameters, states or gradients differ."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar, cast

import numpy as np

from pytest_mlbench.checking.asserts import assert_identical
from pytest_mlbench.engine import protocol as p

R = TypeVar("R")


def agree(values: Sequence[R], where: str) -> R:
    """One reply from a pool's ranks. Parameters, states and gradients must be identical on
    every rank (a broken reduction lets replicas drift); losses are each rank's shard mean,
    averaged (equal shards: the global mean); times are the slowest rank's."""
    first = values[0]
    if len(values) == 1:
        return first
    for rank, other in enumerate(values[1:], start=1):
        _same(first, other, f"{where} rank {rank} vs rank 0")
    agreed: Any = first
    if isinstance(first, p.Stepped):
        steps = cast(Sequence[p.Stepped], values)
        agreed = replace(first, losses=list(np.mean([v.losses for v in steps], axis=0)),
                         times=list(np.max([v.times for v in steps], axis=0)))
    elif isinstance(first, p.Gradient):
        grads = cast(Sequence[p.Gradient], values)
        agreed = replace(first, loss=np.mean([v.loss for v in grads]))
    elif isinstance(first, p.Finished):
        done = cast(Sequence[p.Finished], values)
        if first.trained is not None:
            agreed = replace(first, trained=agree([v.trained for v in done],
                                                  f"{where} after timing"))
        if first.resident is not None:  # each rank's own workers, in rank order
            agreed = replace(agreed, resident={
                k: [b for v in done for b in (v.resident or {}).get(k, [])]
                for k in first.resident})
        if first.collectives is not None:
            agreed = replace(agreed, collectives=[s for v in done for s in v.collectives or []])
    return cast(R, agreed)


def _same(a: object, b: object, where: str) -> None:
    """Rank ``b``'s parameters (and gradients) are rank ``a``'s, bit for bit."""
    mine, theirs = _snapshot(a), _snapshot(b)
    if mine is not None and theirs is not None:
        assert_identical(theirs["params"], mine["params"], where=f"{where} params")
    if isinstance(a, p.Gradient) and isinstance(b, p.Gradient):
        assert_identical(b.grads, a.grads, where=f"{where} gradients")


def _snapshot(reply: object) -> p.Snapshot | None:
    return reply.snapshot if isinstance(reply, p.Started | p.Stepped | p.Finished) else None


def agree_kept(replies: Sequence[Mapping[int, Any]], where: str) -> dict[int, Any]:
    """Each rank's kept results of the same rounds; training states identical on every rank."""
    kept = dict(replies[0])
    for rank, reply in enumerate(replies[1:], start=1):
        for r, snap in reply.items():
            if isinstance(snap, Mapping) and "params" in snap:
                assert_identical(snap["params"], kept[r]["params"],
                                 where=f"{where} rank {rank} vs rank 0 after timed round {r}")
    return kept
