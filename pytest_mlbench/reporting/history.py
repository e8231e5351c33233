"""Many saved runs read as per-case histories, in commit order: what the HTML page and
``report --steps`` read.

Every run is read through storing/runs.py (``load_run``: the one reader, every record checked)
and boiled down to a digest as it is read: per case its figure (seconds a step), the
interval the terminal table prints (the record's own ``interval_s`` when it belongs to the
figure its rounds give, else recomputed), its normalised figure (over the same run's fastest
of its group, or ``--reference``), and each process's median (the per-process samples that
steps.py tests). A series is one case on one machine (its ``Identity.key``, so another size
or data digest is another series), its points the runs that have the case, in commit order:
the commit's time, then when the run was saved. Many files are read in worker processes (one
per usable core)."""

from __future__ import annotations

import math
import multiprocessing
import os
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import parallel
from pytest_mlbench.judging import regression
from pytest_mlbench.storing import fingerprint
from pytest_mlbench.storing.baselines import FILE, BaselineError
from pytest_mlbench.storing.record import Identity, Measure
from pytest_mlbench.storing.runs import Entry, Run, load_run

PARALLEL_FROM = 48  # files; below this, starting worker processes costs more than it saves


@dataclass(frozen=True)
class RunInfo:
    """Where a run came from: its file, machine and commit (pytest-benchmark's commit_info)."""

    path: str
    machine: str
    commit: str  # "" when the run has no commit_info
    commit_time: str  # ISO 8601; the run's own datetime when the commit's is unknown
    saved: str  # when the run was saved (pytest-benchmark's "datetime")
    branch: str = ""
    dirty: bool = False

    @property
    def order(self) -> tuple[datetime, datetime, str]:
        return _when(self.commit_time), _when(self.saved), self.path


@dataclass(frozen=True)
class Point:
    """One case in one run: seconds a step, the interval, normalised, each process's median."""

    ident: Identity
    name: str
    figure: float
    low: float
    high: float
    normalised: float
    processes: tuple[float, ...]


@dataclass(frozen=True)
class Digest:
    info: RunInfo
    points: tuple[Point, ...]


@dataclass
class Series:
    """One case on one machine across the runs that have it, in commit order."""

    machine: str
    ident: Identity
    label: str  # "mlp cpu fp32 jax-jit", with dims or digest where the label repeats
    runs: list[int] = field(default_factory=list)  # indices into History.runs
    points: list[Point] = field(default_factory=list)

    @property
    def layout(self) -> str:
        return layout(self.ident)


def layout(ident: Identity) -> str:
    """The parallel layout's label (``fsdp-w2``), ``single`` for one device."""
    return parallel.Layout(ident.strategy, ident.workers, ident.nodes).label or "single"


@dataclass(frozen=True)
class History:
    runs: tuple[RunInfo, ...]  # commit order
    series: tuple[Series, ...]

    def latest(self) -> dict[str, int]:
        """Per machine, the index of its latest run in commit order."""
        return {info.machine: i for i, info in enumerate(self.runs)}


# -- which files ------------------------------------------------------------------------------

def expand(refs: Sequence[str], resolve: Callable[[str], Path]) -> list[Path]:
    """The run files that RUN arguments name: a folder gives every ``*.json`` under it (a
    whole ``baselines/`` tree; partial runs left out unless named), anything else goes to
    ``resolve`` (a file, a baseline name, ``<machine-id>/<name>``). A file named twice is
    read once."""
    found: dict[str, Path] = {}
    for ref in refs:
        path = Path(ref)
        if path.is_dir():
            files = [f for f in sorted(path.rglob("*.json")) if not _partial(f)]
            if not files:
                raise BaselineError(f"{path}: no saved run (*.json) in this folder; give "
                                    "run files, folders of them or baseline names")
        else:
            files = [resolve(ref)]
        for f in files:
            found.setdefault(os.path.realpath(f), f)
    return list(found.values())


def _partial(path: Path) -> bool:
    match = FILE.match(path.name)
    return bool(match and match[3])


# -- one run into a digest --------------------------------------------------------------------

def digest(run: Run, reference: str | None = None) -> Digest:
    """The run's cases as points; the control benchmark and untimed cases are left out."""
    cases = [(e, r.identity, r.name, _medians(r.measure)) for e, r in run.cases
             if r.measure is not None and not regression.is_control(r)]
    points = [Point(ident, name, *_figure(e, medians), 0.0, tuple(medians))
              for e, ident, name, medians in cases]
    return Digest(run_info(run), normalise(points, reference))


def normalise(points: Sequence[Point], reference: str | None) -> tuple[Point, ...]:
    """The points with their normalised figures: over ``reference``'s in their group where
    the run has it, else over the group's fastest (as the normalised table's)."""
    groups = [p.ident.group for p in points]  # a property that formats: once a point
    fastest: dict[str, float] = {}
    chosen: dict[str, float] = {}
    for p, group in zip(points, groups, strict=True):
        fastest[group] = min(p.figure, fastest.get(group, math.inf))
        if reference is not None and p.ident.impl == reference:
            chosen[group] = p.figure
    return tuple(Point(p.ident, p.name, p.figure, p.low, p.high,
                       p.figure / chosen.get(group, fastest[group]), p.processes)
                 for p, group in zip(points, groups, strict=True))


def _medians(m: Measure | None) -> list[float]:
    """Each process's median seconds a step (``stats.process_medians``, the same numbers):
    ``statistics.median`` takes a few rounds twenty times faster than numpy's, and a long
    history has hundreds of thousands of processes."""
    assert m is not None
    return [statistics.median(rounds) for rounds in m.per_step() if rounds]


def run_info(run: Run) -> RunInfo:
    commit = run.data.get("commit_info") or {}
    saved = _text(run.data.get("datetime"))
    return RunInfo(run.where, fingerprint.machine_id(run.machine_info), _text(commit.get("id")),
                   _text(commit.get("time")) or _text(commit.get("author_time")) or saved,
                   saved, _text(commit.get("branch")), commit.get("dirty") is True)


def _figure(entry: Entry, medians: list[float]) -> tuple[float, float, float]:
    """Seconds a step (``stats.center``: the median of the process medians) and the record's
    interval (``Measure.estimate``). The record keeps that interval (``interval_s``, written
    with the rounds): it is taken when its ``step_s`` is the figure the rounds give, so a
    long history is not bootstrapped again case by case (milliseconds each); otherwise it is
    recomputed."""
    figure = statistics.median(medians)
    kept = ((entry.bench.get("extra_info") or {}).get("mlbench") or {}).get("measure") or {}
    bounds = kept.get("interval_s")
    if isinstance(bounds, list) and len(bounds) == 2 and all(map(_number, bounds)) \
            and _number(kept.get("step_s")) and math.isclose(kept["step_s"], figure, rel_tol=1e-9) \
            and bounds[0] <= figure <= bounds[1]:
        return figure, float(bounds[0]), float(bounds[1])
    record = entry.record
    assert record is not None and record.measure is not None
    est = record.measure.estimate()
    return est.value, est.low, est.high


def digest_file(path: Path | str, reference: str | None = None) -> Digest:
    """A worker process's job: one file read, checked and boiled down."""
    run = load_run(path)
    if not run.cases:
        raise BaselineError(f"{path}: no pytest-mlbench case in this run; give runs saved "
                            "from sessions of pytest-mlbench cases")
    return digest(run, reference)


def digests(paths: Sequence[Path], reference: str | None = None,
            workers: int | None = None) -> list[Digest]:
    """Every file's digest, in worker processes when there are many. Spawned, not forked:
    the caller may be a pytest session with threads of its own."""
    workers = workers or usable_cores()
    job = partial(digest_file, reference=reference)
    if workers < 2 or len(paths) < PARALLEL_FROM:
        return [job(p) for p in paths]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        return list(pool.map(job, paths, chunksize=max(1, len(paths) // (8 * workers))))


def usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


# -- digests into series ----------------------------------------------------------------------

def history(found: Sequence[Digest]) -> History:
    """Runs in commit order, and one series per machine and case identity."""
    ordered = sorted(found, key=lambda d: d.info.order)
    by_key: dict[tuple[str, tuple[Any, ...]], Series] = {}
    for i, d in enumerate(ordered):
        for point in d.points:
            key = (d.info.machine, point.ident.key)
            series = by_key.get(key)
            if series is None:
                series = by_key[key] = Series(d.info.machine, point.ident, _plain(point.ident))
            series.runs.append(i)
            series.points.append(point)
    _disambiguate(list(by_key.values()))
    return History(tuple(d.info for d in ordered),
                   tuple(sorted(by_key.values(), key=lambda s: (s.label, s.machine))))


def _plain(ident: Identity) -> str:
    return f"{ident.group} {ident.impl}"


def _disambiguate(series: list[Series]) -> None:
    """Where one machine has two series under one label (another size, another data digest),
    the label says which, as the machines table's rows do."""
    seen: dict[tuple[str, str], int] = {}
    for s in series:
        seen[(s.machine, s.label)] = seen.get((s.machine, s.label), 0) + 1
    for s in series:
        if seen[(s.machine, s.label)] > 1:
            dims = ",".join(f"{k}={v}" for k, v in sorted(s.ident.dims.items()))
            s.label = f"{s.label} [{dims}]" if dims else s.label
    again: dict[tuple[str, str], int] = {}
    for s in series:
        again[(s.machine, s.label)] = again.get((s.machine, s.label), 0) + 1
    for s in series:
        if again[(s.machine, s.label)] > 1:
            s.label = f"{s.label} [{s.ident.data_sha256[:8] or s.ident.threads}]"


def read(refs: Sequence[str], resolve: Callable[[str], Path], reference: str | None = None,
         workers: int | None = None) -> History:
    """The history of the runs RUN arguments name."""
    return history(digests(expand(refs, resolve), reference, workers))


# -- small readers ----------------------------------------------------------------------------

def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value) and value > 0


def _when(text: str) -> datetime:
    """An ISO 8601 time as an aware datetime (naive ones read as UTC); the earliest time
    when there is none, so runs without a date come first, in file order."""
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def process_logs(series: Series) -> list[np.ndarray]:
    """Per run, the logs of its processes' medians: what steps.py tests."""
    return [np.log(np.asarray(p.processes, dtype=np.float64)) for p in series.points]
