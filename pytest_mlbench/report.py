"""The normalised table: per comparison group, each implementation's step time and its ratio to
the fastest (or a reference), each with the interval a repeat run's figure will fall in (a
Student-t prediction interval over the processes, stats.predicted): "next run 95%".

Two records with the same number of processes ran in the same session (processes interleave
across cases), so their ratio is paired process by process and the host's slow moments cancel;
otherwise the two sides are resampled independently (stats.ratio)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pytest_mlbench import stats, tables
from pytest_mlbench.record import Measure, Record

HEADER = ("implementation", "step (ms)", "next run 95%", "normalised", "next run 95%",
          "GFLOP/s", "util", "compile (s)", "procs x rounds", "")


def normalised_table(records: Iterable[Record], reference: str | None = None) -> list[str]:
    """One block per ``Identity.group`` (first-seen order), rows fastest first; ``reference``
    (an impl such as ``jax-jit``) sets the 1.0 where the group has it, else the fastest does.
    Records without a measure (benchmarking disabled) are left out."""
    groups: dict[str, list[Record]] = {}
    for record in records:
        if record.measure is not None:
            groups.setdefault(record.identity.group, []).append(record)
    lines: list[str] = []
    for group, members in groups.items():
        lines += [group, *block(members, reference)]
    return lines


def block(members: Sequence[Record], reference: str | None) -> list[str]:
    measured = [(r, _measure(r)) for r in members]
    estimates = {id(m): m.estimate() for _, m in measured}
    rows = sorted(measured, key=lambda rm: estimates[id(rm[1])].value)
    ref = next((m for r, m in rows if r.identity.impl == reference), rows[0][1])
    body = [_cells(r.identity.impl, m, estimates[id(m)], ref) for r, m in rows]
    return tables.render(HEADER, body, note=True, indent="  ")


def _measure(record: Record) -> Measure:
    if record.measure is None:  # filtered out by normalised_table
        raise ValueError(f"{record.name}: no measure")
    return record.measure


def relative(measure: Measure, reference: Measure) -> stats.Ratio:
    """``measure / reference`` with its interval: paired when both ran in one session."""
    mine, theirs = measure.per_step(), reference.per_step()
    if len(mine) == len(theirs) > 1:
        return stats.paired_ratio(theirs, mine)
    return stats.ratio(theirs, mine)


def _cells(impl: str, m: Measure, est: stats.Estimate, ref: Measure) -> list[str]:
    ratio = None if m is ref else relative(m, ref)
    return [impl, f"{est.value * 1e3:.4f}", tables.interval(est.low * 1e3, est.high * 1e3, ".4f"),
            f"{ratio.value:.2f}" if ratio else "1.00",
            tables.interval(ratio.next_low, ratio.next_high, ".2f") if ratio else "reference",
            _number(m.gflops, ".2f"), _number(m.utilisation, ".0%"),
            _number(m.compile_s, ".3f"), procs_by_rounds(m),
            "; ".join(note for note in (flag(est), faults(m)) if note)]


def _number(value: float | None, fmt: str) -> str:
    return "-" if value is None else f"{value:{fmt}}"


def procs_by_rounds(m: Measure) -> str:
    """``5 x 20``: processes by timed rounds per process (a range when they differ)."""
    counts = [len(p) for p in m.passes if p]
    each = str(counts[0]) if min(counts) == max(counts) else f"{min(counts)}-{max(counts)}"
    return f"{len(counts)} x {each}"


FAULTS_NOTE = 64  # page faults a timed step from which the table shows them (~0.1 ms here)


def faults(m: Measure) -> str:
    """``page faults 12-16059 a step`` when some process mapped memory in while timed (the
    allocator is set up so that none should: engine/allocator.py); the spread shows whether
    they explain an unstable figure."""
    if not m.faults_per_step or max(m.faults_per_step) < FAULTS_NOTE:
        return ""
    low, high = min(m.faults_per_step), max(m.faults_per_step)
    span = f"{low:.0f}" if round(low) == round(high) else f"{low:.0f}-{high:.0f}"
    return f"page faults {span} a step"


def flag(est: stats.Estimate) -> str:
    """``unstable: modes 0.72 | 1.61 ms`` when the processes disagree (stats.UNSTABLE)."""
    if not est.unstable:
        return ""
    modes = " | ".join(f"{m * 1e3:.4g}" for m in est.modes)
    return f"unstable: spread {est.spread:.0%}, modes {modes} ms"
