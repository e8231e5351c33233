"""The regression gate's judgement: this run's records against a baseline's, like with like.

Records are matched by ``Identity.key`` (workload, task, shape and dims, framework, variant,
device, precision, dtype, workers, threads, data digest). A benchmark of the same test that
ran with another identity (a smoke run against a default-size baseline) is "not comparable",
with the differences, and never judged. A matched pair is judged on seconds per step with
Welch's t-test on the logs of the two sides' process medians (stats.ratio): each side's
variance is what its comparison group says in its run (the group's cases ran in the same
passes, so a pass's moments of the host are shared and estimated from all of them:
spread.group_spreads), plus the variance by which the two runs' matched figures differ
beyond their processes (spread.between_runs: runs recorded on different days differ by
more than their processes show). SLOWER when slower with p below alpha *and* by more than
the threshold (a minimum effect size, so a tiny consistent shift does not fail an honest
change). Fewer than 2 processes on either side is "inconclusive": rounds of one process
cannot speak for the next process. Nothing judged is never a pass
(``Judgement.nothing_judged``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pytest_mlbench import stats, tables
from pytest_mlbench.spread import NO_BETWEEN, Between, Parts, between_runs, group_spreads
from pytest_mlbench.storing.record import Measure, Record
from pytest_mlbench.storing.runs import Entry, Run

SLOWER = "SLOWER"
CONTROL_SLOWER = "machine slower (control; not a failure)"
MIN_PROCESSES = 2


@dataclass(frozen=True)
class Row:
    """One current benchmark against its baseline."""

    name: str
    verdict: str
    threshold: float
    baseline: stats.Estimate | None = None  # seconds per step
    current: stats.Estimate | None = None
    ratio: stats.Ratio | None = None  # current / baseline

    @property
    def failed(self) -> bool:
        return self.verdict == SLOWER

    @property
    def judged(self) -> bool:
        return self.ratio is not None


@dataclass(frozen=True)
class Judgement:
    rows: tuple[Row, ...]
    missing: tuple[str, ...] = ()  # mlbench cases of this run the baseline lacks
    unrun: tuple[str, ...] = ()  # baseline cases this run did not run
    plain: tuple[str, ...] = ()  # benchmarks without an mlbench record

    @property
    def failed(self) -> list[Row]:
        return [r for r in self.rows if r.failed]

    @property
    def judged(self) -> list[Row]:
        return [r for r in self.rows if r.judged]

    def nothing_judged(self) -> str | None:
        """Why nothing was judged, or None when something was."""
        if self.judged:
            return None
        if not self.rows and not self.missing:
            return ("no mlbench case ran" + (f" ({len(self.plain)} plain benchmarks without "
                                              "an mlbench record)" if self.plain else ""))
        counts: dict[str, int] = {}
        for row in self.rows:
            kind = row.verdict.split(":")[0].split(" (")[0]
            counts[kind] = counts.get(kind, 0) + 1
        if self.missing:
            counts["not in the baseline"] = len(self.missing)
        return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def is_control(record: Record) -> bool:
    """The control benchmark measures the machine, not the code: it is reported, never failed."""
    return record.identity.workload == "control"


def verdict(ratio: stats.Ratio, threshold: float, alpha: float) -> str:
    if ratio.p_slower < alpha and ratio.change > threshold:
        return SLOWER
    if ratio.p_slower < alpha:
        return "slower, within threshold"
    if ratio.p_faster < alpha:
        return "faster"
    return "no significant change"


def _processes(measure: Measure | None) -> int:
    return 0 if measure is None else sum(1 for rounds in measure.passes if rounds)


def _estimate(measure: Measure | None) -> stats.Estimate | None:
    return measure.estimate() if measure is not None and _processes(measure) else None


def _inconclusive(base: Measure | None, cur: Measure | None) -> str | None:
    for side, measure in (("baseline", base), ("current", cur)):
        if measure is None or not _processes(measure):
            return f"inconclusive ({side} has no timed rounds)"
        if _processes(measure) < MIN_PROCESSES:
            return (f"inconclusive ({side} has {_processes(measure)} process; "
                    f"{MIN_PROCESSES} are needed)")
    return None


@dataclass(frozen=True)
class Spread:
    """What two runs say about spread beyond one figure's processes: per figure (by the id of
    its record), the variance of one of its processes from its comparison group in its run
    (spread.group_spreads), and the variance between the runs' matched figures
    (spread.between_runs)."""

    baseline: Mapping[int, Parts] = field(default_factory=dict)
    current: Mapping[int, Parts] = field(default_factory=dict)
    between: Between = NO_BETWEEN

    @classmethod
    def of(cls, baseline: Run, current: Run, pairs: Sequence[tuple[Record, Record]]) -> Spread:
        sides = _group_spreads(baseline), _group_spreads(current)
        judged = [(b, c) for b, c in pairs if b.measure is not None and c.measure is not None
                  and _inconclusive(b.measure, c.measure) is None]
        found = [stats.log_difference(b.measure.per_step(), c.measure.per_step(),
                                      (sides[0].get(id(b)), sides[1].get(id(c))))
                 for b, c in judged if b.measure is not None and c.measure is not None]
        diffs, variances, dfs = ([f[i] for f in found] for i in range(3))
        groups = len({c.identity.group for _, c in judged})  # a group's figures move together
        return cls(*sides, between_runs(diffs, variances, dfs, groups))

    def of_pair(self, base: Record, cur: Record) -> tuple[Parts | None, Parts | None]:
        return self.baseline.get(id(base)), self.current.get(id(cur))


def _group_spreads(run: Run) -> dict[int, Parts]:
    """Each figure of two processes or more, its spread as its comparison group in the run
    gives it (the group's cases ran in the same passes)."""
    groups: dict[str, list[Record]] = {}
    for _, record in run.cases:
        if _processes(record.measure) >= MIN_PROCESSES:
            groups.setdefault(record.identity.group, []).append(record)
    found: dict[int, Parts] = {}
    for members in groups.values():
        logs = [np.log(stats.process_medians(r.measure.per_step())) for r in members
                if r.measure is not None]
        found.update((id(r), parts) for r, parts in zip(members, group_spreads(logs),
                                                         strict=True))
    return found


def compare(name: str, base: Record, cur: Record, *, threshold: float, alpha: float,
            spread: Spread | None = None) -> Row:
    """One matched pair (equal identity keys), judged with what the runs say about spread."""
    old, new = _estimate(base.measure), _estimate(cur.measure)
    why = _inconclusive(base.measure, cur.measure)
    if why is not None or base.measure is None or cur.measure is None:
        return Row(name, why or "inconclusive", threshold, old, new)
    spread = spread or Spread()
    ratio = stats.ratio(base.measure.per_step(), cur.measure.per_step(),
                        spreads=spread.of_pair(base, cur), between=spread.between)
    found = verdict(ratio, threshold, alpha)
    if found == SLOWER and is_control(cur):
        found = CONTROL_SLOWER
    return Row(name, found, threshold, old, new, ratio)


def not_comparable(name: str, base: Record, cur: Record, threshold: float) -> Row:
    diffs = "; ".join(base.identity.differences(cur.identity))
    return Row(name, f"not comparable: {diffs}", threshold, _estimate(base.measure),
               _estimate(cur.measure))


Case = tuple[Entry, Record]


def _pick(candidates: Sequence[Case], entry: Entry, record: Record,
          used: set[str]) -> Case | None:
    """Among baseline cases, the same test first, then the same case name, then any."""
    free = [c for c in candidates if c[0].fullname not in used]
    for same in (lambda c: c[0].fullname == entry.fullname,
                 lambda c: c[1].name == record.name, lambda c: True):
        found = next((c for c in free if same(c)), None)
        if found is not None:
            return found
    return None


def judge(baseline: Run, current: Run, *, threshold: float, alpha: float,
          thresholds: Mapping[str, float] | None = None) -> Judgement:
    """Every mlbench case of ``current`` against ``baseline``; ``thresholds`` by fullname."""
    matched, missing = _match(baseline, current)
    spread = Spread.of(baseline, current, [(b[1], c) for _, b, c, same in matched if same])
    rows = []
    for entry, (_, base), record, same in matched:
        limit = (thresholds or {}).get(entry.fullname, threshold)
        rows.append(compare(entry.name, base, record, threshold=limit, alpha=alpha,
                            spread=spread)
                    if same else not_comparable(entry.name, base, record, limit))
    used = {b[0].fullname for _, b, _, _ in matched}
    unrun = tuple(e.name for e, _ in baseline.cases if e.fullname not in used)
    plain = tuple(e.name for e in current.entries if e.record is None)
    return Judgement(tuple(rows), tuple(missing), unrun, plain)


Match = tuple[Entry, Case, Record, bool]  # current's entry, the baseline's case, current's
# record, and whether their identities are equal


def _match(baseline: Run, current: Run) -> tuple[list[Match], list[str]]:
    """Each current case's baseline case: equal identity first, else the same test or case
    with another identity (not comparable); and the names the baseline lacks."""
    by_key: dict[tuple[object, ...], list[Case]] = {}
    for case in baseline.cases:
        by_key.setdefault(case[1].identity.key, []).append(case)
    matched: list[Match] = []
    missing: list[str] = []
    used: set[str] = set()
    for entry, record in current.cases:
        same = _pick(by_key.get(record.identity.key, []), entry, record, used)
        # no equal identity: the same test or case with another identity is not comparable
        other = same or _pick([c for c in baseline.cases if c[0].fullname == entry.fullname
                               or c[1].name == record.name], entry, record, used)
        if other is None:
            missing.append(entry.name)
            continue
        used.add(other[0].fullname)
        matched.append((entry, other, record, same is not None))
    return matched, missing


# -- presentation -------------------------------------------------------------------------------

def _ms(est: stats.Estimate | None) -> str:
    return "-" if est is None else f"{est.value * 1e3:.4f}"


def _procs(est: stats.Estimate | None) -> str:
    return "-" if est is None else str(est.processes)


def table(rows: Sequence[Row]) -> list[str]:
    """Baseline and current step time, change with its confidence interval, limit, p,
    verdict."""
    header = ["benchmark", "baseline (ms)", "current (ms)", "change",
              f"{stats.CONFIDENCE:.0%} interval", "limit",
              "p slower", "procs", "verdict"]
    body = []
    for r in rows:
        q = r.ratio
        body.append([r.name, _ms(r.baseline), _ms(r.current),
                     tables.number(q.change, "+.1%") if q else "-",
                     tables.interval(q.low - 1, q.high - 1, "+.1%") if q else "-",
                     f"{r.threshold:.0%}", f"{q.p_slower:.2g}" if q else "-",
                     f"{_procs(r.baseline)}/{_procs(r.current)}", r.verdict])
    return tables.render(header, body, note=True)


def details(j: Judgement) -> list[str]:
    """What was left out of the table, one line each kind."""
    lines = []
    for names, what in ((j.missing, "not in the baseline (not judged)"),
                        (j.unrun, "in the baseline, not run this time"),
                        (j.plain, "plain benchmarks without an mlbench record (not judged)")):
        if names:
            lines.append(f"{what}: {', '.join(names)}")
    return lines


def summary(j: Judgement) -> str:
    """The gate's line: passed, with how many were judged, or what failed."""
    failure = failed_line(j)
    if failure is not None:
        return f"mlbench gate: {'' if failure.startswith('nothing') else 'FAILED: '}{failure}"
    rest = len(j.rows) - len(j.judged) + len(j.missing)
    return (f"mlbench gate: passed ({len(j.judged)} judged, none significantly slower"
            f"{f'; {rest} not judged' if rest else ''})")


def failed_line(j: Judgement) -> str | None:
    """Why the gate failed, naming the slower benchmarks (``1 of 9 judged benchmarks slower:
    ...``) or ``nothing judged: ...``; None when it passed."""
    why = j.nothing_judged()
    if why is not None:
        return f"nothing judged: {why}"
    failed, judged = j.failed, j.judged
    if not failed:
        return None
    rest = len(j.rows) - len(judged) + len(j.missing)
    return (f"{len(failed)} of {len(judged)} judged benchmarks slower: "
            + ", ".join(f"{r.name} {tables.number(r.ratio.change, '+.1%')} "
                        f"(p={r.ratio.p_slower:.2g})" for r in failed if r.ratio)
            + (f"; {rest} not judged" if rest else ""))


def fails(j: Judgement) -> bool:
    """A gate that judged nothing or found a slowdown does not pass."""
    return bool(j.failed) or j.nothing_judged() is not None
