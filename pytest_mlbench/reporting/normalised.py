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
from pytest_mlbench.storing.record import Measure, Record, run_prior

NEXT = f"next run {stats.PREDICTION:.0%}"
HEADER = ("implementation", "step (ms)", NEXT, "normalised", NEXT,
          "GFLOP/s", "util", "over bare", "compile (s)", "procs x rounds", "")
OVERHEAD_NOTE = 1.10  # a figure this far over its bare loop is marked


def legend() -> str:
    """One line under the table for a first-time reader: what its columns mean."""
    return (f"normalised: step time over the group's fastest; [a, b]: a {stats.PREDICTION:.0%} "
            "interval for the figure the next run (as many processes) will show; util: share of "
            "this session's measured matmul peak; over bare: the figure over the same step in "
            "a plain loop with one sync (the harness's own cost; informative, the figure is "
            "the audited rounds'); compile: the first process's compile time, never inside "
            "a timed round: cold, or 'cached' when loaded from the compile cache kept across "
            "runs, with the cold figure beside it (README: reading the table)")


def normalised_table(records: Iterable[Record], reference: str | None = None) -> list[str]:
    """One block per ``Identity.group`` (first-seen order), rows fastest first; ``reference``
    (an impl such as ``jax-jit``) sets the 1.0 where the group has it, else the fastest does.
    Records without a measure (benchmarking disabled) are left out."""
    found = normalised_blocks(records, reference)
    lines: list[str] = []
    for group, rows in found:
        lines += [group, *tables.render(HEADER, rows, note=True, indent="  ")]
    if any(shows_spread(row) for _, rows in found for row in rows):
        lines.append(few_processes_line())
    return lines


def normalised_blocks(records: Iterable[Record], reference: str | None = None,
                      ) -> list[tuple[str, list[list[str]]]]:
    """The normalised table's cells: per group (first-seen order), its rows under ``HEADER``,
    fastest first, as ``normalised_table`` prints them (the HTML page shows the same cells)."""
    measured = [r for r in records if r.measure is not None]
    prior = run_prior(r.measure for r in measured)  # three processes judged with the run's df
    groups: dict[str, list[tuple[Record, Measure, stats.Estimate]]] = {}
    for record in measured:
        if record.measure is not None:
            groups.setdefault(record.identity.group, []).append(
                (record, record.measure, record.measure.estimate(prior)))
    blocks = []
    for members in groups.values():
        members.sort(key=lambda rme: rme[2].value)
        ref = next((m for r, m, _ in members if r.identity.impl == reference), members[0][1])
        blocks.append((members, ref))
    found = iter(relatives([(m, ref) for members, ref in blocks
                            for _, m, _ in members if m is not ref]))
    return [(group, [_cells(r.identity.impl, m, est, None if m is ref else next(found), ref)
                     for r, m, est in members])
            for (group, _), (members, ref) in zip(groups.items(), blocks, strict=True)]


def shows_spread(row: Sequence[str]) -> bool:
    """A row whose step interval is the processes' spread (too few for an interval)."""
    return row[2].startswith("spread")


# fewer processes than this and a prediction interval says nothing: Student's t with one
# degree of freedom puts a 99% interval at 64 standard errors ([0.0000, 8217356] ms for a
# 0.4 ms step at two processes); the table shows the processes' spread instead
USABLE_PROCESSES = 3


def few_processes_line() -> str:
    return (f"spread a-b: the processes' lowest and highest figure; with fewer than "
            f"{USABLE_PROCESSES} processes a {stats.PREDICTION:.0%} interval for the next run is "
            f"too wide to use, so the table shows that spread instead: "
            f"--mlbench-processes={USABLE_PROCESSES} or more gives an interval (5 a narrow one)")


def _spread(values: Sequence[float], fmt: str) -> str:
    return f"spread {tables.number(min(values), fmt)}-{tables.number(max(values), fmt)}"


def _medians(m: Measure) -> list[float]:
    return [float(np.median(p)) for p in m.per_step() if len(p)]


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
    ran in the session (each process pair's ratio from the two cases' rounds of the same
    cycles: a group's cases take their turns in every cycle of a pass, so a cycle's moment
    of the host falls on both), and then moderated by the spread of the run's other paired
    ratios (stats.Prior, fitted over ``pairs``); otherwise independent (stats.ratio)."""
    sides = [(ref.per_step(), m.per_step(), (ref.cycles, m.cycles)) for m, ref in pairs]
    paired = [len(mine) == len(theirs) > 1 for theirs, mine, _ in sides]
    logs = [stats.paired_logs(theirs, mine, cycles)
            for (theirs, mine, cycles), p in zip(sides, paired, strict=True) if p]
    prior = stats.Prior.fit([(float(np.var(x, ddof=1)), len(x) - 1) for x in logs])
    return [stats.paired_ratio(theirs, mine, cycles=cycles, prior=prior) if p
            else stats.ratio(theirs, mine)
            for (theirs, mine, cycles), p in zip(sides, paired, strict=True)]


def _cells(impl: str, m: Measure, est: stats.Estimate, ratio: stats.Ratio | None,
           ref: Measure | None = None) -> list[str]:
    few = est.processes < USABLE_PROCESSES
    step = (_spread([v * 1e3 for v in _medians(m)], ".4f") if few
            else tables.interval(est.low * 1e3, est.high * 1e3, ".4f"))
    return [impl, f"{est.value * 1e3:.4f}", step,
            f"{ratio.value:.2f}" if ratio else "1.00",
            _ratio_interval(m, ref, ratio) if ratio else "reference",
            _number(m.gflops, ".2f"), _number(m.utilisation, ".0%"),
            _number(m.overhead, ".2f"), compile_cell(m), procs_by_rounds(m),
            "; ".join(note for note in (flag(est), faults(m), over_bare(m)) if note)]


def compile_cell(m: Measure) -> str:
    """``2.134`` (cold, or not said), ``0.412 cached, cold 2.134`` (loaded from the compile
    cache; its cold figure as the run that filled it measured it), ``0.412 cached`` (no cold
    figure kept: ``--mlbench-compile-cache=cold`` measures one)."""
    figure = _number(m.compile_s, ".3f")
    if m.compiled_from != "cache" or m.compile_s is None:
        return figure
    cold = f", cold {m.cold_compile_s:.3f}" if m.cold_compile_s is not None else ""
    return f"{figure} cached{cold}"


def over_bare(m: Measure) -> str:
    """``12% over its bare loop`` when the audited figure exceeds the same step in a plain
    loop by more than OVERHEAD_NOTE: the harness's rounds cost the step more than they
    should (their reads and sync, a round too short), or the step is slower when the harness
    looks (docs/MEASURING.md: the bare loop)."""
    if m.overhead is None or m.overhead <= OVERHEAD_NOTE:
        return ""
    return f"{m.overhead - 1:.0%} over its bare loop"


def _ratio_interval(m: Measure, ref: Measure | None, ratio: stats.Ratio) -> str:
    """The ratio's interval for the next run, or, with too few processes for one, the spread
    of its process-by-process ratios (paired) or ``-`` (processes not paired)."""
    if ratio.pairs >= USABLE_PROCESSES or ref is None:
        return tables.interval(ratio.next_low, ratio.next_high, ".2f")
    mine, theirs = _medians(m), _medians(ref)
    if len(mine) != len(theirs) or not mine:
        return "-"
    return _spread([a / b for a, b in zip(mine, theirs, strict=True)], ".2f")


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
