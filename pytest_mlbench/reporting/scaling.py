"""The scaling table: what a user of the parallel strategies reads. Per workload (head, device,
precision) that has parallel cases, one row per implementation and layout: the step time, the
items per second (examples; tokens for a sequence model), globally and per worker, the scaling
efficiency against the same implementation on one worker (strong scaling: the global batch is
the same at every worker count, so a perfect split runs N workers in 1/N of the time), the share
of a step spent in collectives (the record's ``checks.collectives``: the framework's profiler
after timing, each pass's workers averaged, the median pass) and that share of the timed step,
and the bytes each worker holds
of parameters, gradients and optimizer state (the record's ``checks.resident``, the sharding
check's reading; its largest worker)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_mlbench import tables
from pytest_mlbench.storing.record import Record

HEADER = ("implementation", "layout", "step (ms)", "items/s", "per worker", "efficiency",
          "collectives", "held per worker (MiB)", "params | grads | state")


def legend() -> str:
    return ("items: examples, or tokens (batch x seq) for a sequence model; "
            "collectives: the share of a step in the framework's collective ops (its profiler, "
            "after timing, waiting for peers included) and that share of the step; "
            "efficiency: the one-worker step over (workers x this step), 1.00 a perfect split "
            "of the same global batch; held: the largest worker's parameters, gradients and "
            "optimizer state (docs/DISTRIBUTED.md: reading the scaling table)")


def scaling_table(records: Iterable[Record]) -> list[str]:
    """One block per workload group that has a parallel case, rows in layout order; empty
    when no record is a parallel one or none was timed."""
    timed = [r for r in records if r.measure is not None]
    parallel_impls = {(r.identity.head, r.identity.device, r.identity.precision,
                       r.identity.framework, r.identity.variant)
                      for r in timed if r.identity.strategy}
    blocks: dict[tuple[str, str, str], list[Record]] = {}
    for r in timed:
        i = r.identity
        if (i.head, i.device, i.precision, i.framework, i.variant) in parallel_impls:
            blocks.setdefault((i.head or i.workload, i.device, i.precision), []).append(r)
    lines: list[str] = []
    for (head, device, precision), members in blocks.items():
        one = {(r.identity.framework, r.identity.variant): _step(r) for r in members
               if not r.identity.strategy}
        members.sort(key=lambda r: (r.identity.framework, r.identity.variant,
                                    r.identity.workers, r.identity.strategy))
        body = [_row(r, one.get((r.identity.framework, r.identity.variant))) for r in members]
        lines += [f"{head} {device} {precision}", *tables.render(HEADER, body, left=2, indent="  ")]
    return lines


def _step(record: Record) -> float:
    assert record.measure is not None
    return float(record.measure.estimate().value)


def items(record: Record) -> int:
    """Items in a global step: the shape's batch (1 where it names none), times its sequence
    length where it has one (tokens)."""
    dims = record.identity.dims
    return int(dims.get("batch", 1)) * int(dims.get("seq", 1))


def _row(record: Record, single: float | None) -> list[str]:
    i = record.identity
    step = _step(record)
    rate = items(record) / step if step > 0 else float("nan")
    layout = i.impl.removeprefix(f"{i.framework}-{i.variant}").lstrip("-") or "1 device"
    efficiency = "" if single is None or step <= 0 else f"{single / (i.workers * step):.2f}"
    held = resident(record.checks)
    comm = collective_share(record.checks)
    return [f"{i.framework}-{i.variant}", layout, f"{step * 1e3:.3g}", f"{rate:,.0f}",
            f"{rate / i.workers:,.0f}", efficiency,
            "" if comm is None else f"{comm:.0%} ({comm * step * 1e3:.2g} ms)",
            "" if held is None else f"{sum(b or 0 for b in held) / 2**20:.3g}",
            "" if held is None else " | ".join("-" if b is None else f"{b / 2**20:.3g}"
                                               for b in held)]


def collective_share(checks: Mapping[str, Any]) -> float | None:
    """A step's share in collectives: each pass's workers averaged, the median pass (None:
    not measured)."""
    passes = checks.get("collectives")
    if not isinstance(passes, list):
        return None
    means = sorted(sum(p) / len(p) for p in passes
                   if isinstance(p, list) and p and all(isinstance(s, int | float) for s in p))
    return means[len(means) // 2] if means else None


def resident(checks: Mapping[str, Any]) -> tuple[int | None, int | None, int | None] | None:
    """The largest worker's bytes of parameters, gradients and optimizer state, as the
    record's sharding check read them (None: not a parallel record, or not read; a category
    the engine does not report, None)."""
    found = checks.get("resident")
    if not isinstance(found, Mapping):
        return None
    out: list[int | None] = []
    for key in ("params", "grads", "optimizer_state"):
        values = found.get(key)
        if values is not None and not (isinstance(values, list) and values
                                       and all(isinstance(v, int) for v in values)):
            return None
        out.append(None if values is None else max(values))
    return out[0], out[1], out[2]
