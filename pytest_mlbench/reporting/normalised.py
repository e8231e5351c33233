"""The normalised table: per comparison group, each implementation's step time and its ratio to
the fastest (or a reference), each with the interval a repeat run's figure will fall in (a
Student-t prediction interval over the processes, stats.predicted): "next run 99%"
(stats.PREDICTION).

Two records with the same number of processes ran in the same session (processes interleave
across cases), so their ratio is paired process by process and the host's slow moments cancel;
otherwise the two sides are resampled independently (stats.ratio). The paired ratios of one
table share what they say about spread (stats.Prior): a ratio whose few processes agreed by
chance does not get an interval narrower than the run supports."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from pytest_mlbench import stats, tables
from pytest_mlbench.measuring import hostspeed
from pytest_mlbench.storing.record import Measure, Record

NEXT = f"next run {stats.PREDICTION:.0%}"
HEADER = ("implementation", "step (ms)", NEXT, "normalised", NEXT,
          "GFLOP/s", "util", "compile (s)", "procs x rounds", "")


def legend() -> str:
    """One line under the table for a first-time reader: what its columns mean."""
    return (f"normalised: step time over the group's fastest; [a, b]: a {stats.PREDICTION:.0%} "
            "interval for the figure the next run (as many processes) will show; util: share of "
            "this session's measured matmul peak; compile: the first process's cold compile "
            "time, never inside a timed round (README: reading the table)")


def normalised_table(records: Iterable[Record], reference: str | None = None) -> list[str]:
    """One block per ``Identity.group`` (first-seen order), rows fastest first; ``reference``
    (an impl such as ``jax-jit``) sets the 1.0 where the group has it, else the fastest does.
    Records without a measure (benchmarking disabled) are left out."""
    groups: dict[str, list[tuple[Record, Measure, stats.Estimate]]] = {}
    for record in records:
        if record.measure is not None:
            groups.setdefault(record.identity.group, []).append(
                (record, record.measure, record.measure.estimate()))
    blocks = []
    for members in groups.values():
        members.sort(key=lambda rme: rme[2].value)
        ref = next((m for r, m, _ in members if r.identity.impl == reference), members[0][1])
        blocks.append((members, ref))
    found = iter(relatives([(m, ref) for members, ref in blocks
                            for _, m, _ in members if m is not ref]))
    lines: list[str] = []
    for (group, _), (members, ref) in zip(groups.items(), blocks, strict=True):
        body = [_cells(r.identity.impl, m, est, None if m is ref else next(found))
                for r, m, est in members]
        lines += [group, *tables.render(HEADER, body, note=True, indent="  ")]
    return lines


def uncounted_line(records: Iterable[Record]) -> str | None:
    """Which cases had audited rounds whose step count from the seeded start could not be
    judged (audit.count_unreadable), or None; their rounds were judged from where they
    started all the same."""
    found = {r.name: sum(len(p) for p in r.checks.get("uncounted_rounds") or ())
             for r in records}
    found = {name: n for name, n in found.items() if n}
    if not found:
        return None
    cases = ", ".join(f"{name} ({n})" for name, n in found.items())
    return (f"audited rounds not counted from the seeded start (training there moves honest "
            f"runs rounded differently off the step; each round's own steps were checked): "
            f"{cases}")


def process_table(records: Iterable[Record],
                  probe: Mapping[str, Sequence[float]] | None = None) -> list[str]:
    """Each implementation's median step time (ms) in each of its processes, in the order the
    processes ran (process i of every case ran in the session's pass i), group by group,
    fastest first; then the host probe taken before each pass, when the run has one. It tells
    modes (some processes fast, some slow, in any order) from drift (a stretch of slow
    processes, often every implementation's at once), which one figure and its spread cannot."""
    groups: dict[str, list[tuple[str, list[float]]]] = {}
    for record in records:
        if record.measure is not None:
            medians = stats.process_medians(record.measure.per_step())
            groups.setdefault(record.identity.group, []).append((record.identity.impl, medians))
    width = max((len(m) for members in groups.values() for _, m in members), default=0)
    header = ("implementation", *(str(i + 1) for i in range(width)))
    lines: list[str] = []
    for group, members in groups.items():
        members.sort(key=lambda im: float(np.median(im[1])) if im[1] else np.inf)
        smallest = min((m for _, medians in members for m in medians), default=1.0)
        places = max(0, 3 - int(np.floor(np.log10(smallest * 1e3))))  # 4 digits, the fastest
        rows = [_padded(impl, [f"{m * 1e3:.{places}f}" for m in medians], width)
                for impl, medians in members]
        lines += [f"{group}: median step (ms) in each process, in the order they ran",
                  *tables.render(header, rows, indent="  ")]
    found = hostspeed.readings(probe or {})
    if found and lines:
        passes = max(len(values) for values in found.values())
        rows = [_padded(hostspeed.LABELS[name], [f"{v:.2f}" for v in values], passes)
                for name, values in found.items()]
        lines += ["host probe before each process (ms)",
                  *tables.render(("probe", *(str(i + 1) for i in range(passes))), rows,
                                 indent="  ")]
    return lines


def _padded(label: str, cells: list[str], width: int) -> list[str]:
    """A row of ``width`` cells after its label, a dash for each process it lacks."""
    return [label, *cells, *["-"] * (width - len(cells))]


def relatives(pairs: Sequence[tuple[Measure, Measure]]) -> list[stats.Ratio]:
    """``measure / reference`` for each pair of one run, with its interval: paired when both
    ran in the session, and then moderated by the spread of the run's other paired ratios
    (stats.Prior, fitted over ``pairs``); otherwise independent (stats.ratio)."""
    sides = [(ref.per_step(), m.per_step()) for m, ref in pairs]
    paired = [len(mine) == len(theirs) > 1 for theirs, mine in sides]
    logs = [stats.paired_logs(theirs, mine)
            for (theirs, mine), p in zip(sides, paired, strict=True) if p]
    prior = stats.Prior.fit([(float(np.var(x, ddof=1)), len(x) - 1) for x in logs])
    return [stats.paired_ratio(theirs, mine, prior=prior) if p else stats.ratio(theirs, mine)
            for (theirs, mine), p in zip(sides, paired, strict=True)]


def _cells(impl: str, m: Measure, est: stats.Estimate, ratio: stats.Ratio | None) -> list[str]:
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
    """``unstable: spread 124%, modes 0.72 | 1.61 ms`` when the processes disagree
    (stats.UNSTABLE); ``no separate modes`` when they spread out with no gap between them
    (a drifting host, not a process that lands in one of two states)."""
    if not est.unstable:
        return ""
    if len(est.modes) < 2:
        return f"unstable: spread {est.spread:.0%}, no separate modes"
    modes = " | ".join(f"{m * 1e3:.4g}" for m in est.modes)
    return f"unstable: spread {est.spread:.0%}, modes {modes} ms"
