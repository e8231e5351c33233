"""Where a run's seconds went: each activity's wall seconds, by pass and framework.

A campaign's work nests (a case's checks before timing ask for a reference, which may ask
the autodiff oracle), so ``spend(what)`` charges the seconds spent inside it to ``what``
less those of any ``spend`` nested inside, which go to theirs: every second is charged once,
to the innermost activity. Seconds go to the account the calling thread opened with
``account(sheet, pass_no, framework)``; outside one, ``spend`` costs a clock reading and
charges nothing (a check run outside a campaign, a unit test).

Untimed jobs run side by side, one per core, each charging its own thread's seconds, so a
pass's activities may add up to more than its wall time; the phases' walls (``phase``) say
how long the pass took. Leaf module: no NumPy; of the package only tables.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_mlbench.tables import render

__all__ = ["ACTIVITIES", "HARNESS", "PHASES", "UNRECORDED", "Timesheet", "account", "charge",
           "spend"]

# what a run's seconds are spent on, in the order they are shown
ACTIVITIES: dict[str, str] = {
    "start": "worker start and imports",
    "build": "build (less compilation)",
    "compile": "compilation (first calls)",
    "references": "float64 references (oracle, trajectories)",
    "checks_before": "checks before timing",
    "warmup": "warm-up rounds (calibration in the first pass)",
    "pretouch": "heap pre-touch (a fresh process's memory faulted in)",
    "peaks": "matmul peaks",
    "timed": "timed rounds (recorded)",
    "dropped": "timed rounds (dropped)",
    "turns": "turn overhead (messages, digests)",
    "cores": "cores used and thread controls read (rounds, turns)",
    "audits": "audits (fetch and judge)",
    "checks_after": "checks after timing",
    "waiting": "waiting (oracle, shared references)",
    "other": "other (host probe, closing cases)",
}
PHASES: dict[str, str] = {
    "probe": "host probe",
    "start": "workers starting",
    "untimed": "untimed phases (jobs side by side)",
    "timed": "timed phases (alone)",
}
HARNESS = "-"  # the account of work no framework's: the host probe, the peaks' bookkeeping
# a timed pass's work on rounds it does not record (warm-up and calibration, each turn's
# dropped round, the turns' messages, digests and bare loops, reading the cores, the audits),
# set beside the rounds it records ("timed")
UNRECORDED = ("warmup", "dropped", "turns", "cores", "audits")


@dataclass
class Timesheet:
    """Seconds by (pass, framework, activity), and each pass's phases' walls by (pass, phase).
    Safe to add to from several threads."""

    seconds: dict[tuple[int, str, str], float] = field(default_factory=dict)
    walls: dict[tuple[int, str], float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # each thread's open ``spend`` blocks, (pass, framework, stack): what a run cut short (a
    # borrowed machine's window, Ctrl-C) was doing when it ended
    _open: dict[int, tuple[int, str, list[_Frame]]] = field(default_factory=dict, repr=False)

    def in_flight(self) -> list[dict[str, Any]]:
        """The innermost activity each thread is inside now, with its seconds so far."""
        now = time.perf_counter()
        with self._lock:
            open_ = list(self._open.values())
        found = []
        for pass_no, framework, stack in open_:
            frames = list(stack)
            if frames:
                found.append({"pass": pass_no + 1, "framework": framework,
                              "activity": frames[-1].what,
                              "seconds": round(now - frames[-1].began, 3)})
        return sorted(found, key=lambda f: -f["seconds"])

    def add(self, pass_no: int, framework: str, what: str, seconds: float) -> None:
        if what not in ACTIVITIES:
            raise ValueError(f"unknown activity {what!r}: one of {', '.join(ACTIVITIES)}")
        key = (pass_no, framework, what)
        with self._lock:
            self.seconds[key] = self.seconds.get(key, 0.0) + seconds

    @contextlib.contextmanager
    def phase(self, pass_no: int, what: str) -> Iterator[None]:
        """The wall time of one of a pass's phases (PHASES), added to the phase's total."""
        began = time.perf_counter()
        try:
            yield
        finally:
            key = (pass_no, what)
            with self._lock:
                self.walls[key] = self.walls.get(key, 0.0) + time.perf_counter() - began

    def to_json(self) -> dict[str, Any]:
        """{"passes": [{"pass": 1, "phases": {...}, "frameworks": {fw: {activity: s}}}]}."""
        with self._lock:
            seconds, walls = dict(self.seconds), dict(self.walls)
        numbers = sorted({p for p, _, _ in seconds} | {p for p, _ in walls})
        passes = []
        for n in numbers:
            frameworks: dict[str, dict[str, float]] = {}
            for (p, fw, what), s in sorted(seconds.items()):
                if p == n:
                    frameworks.setdefault(fw, {})[what] = round(s, 3)
            phases = {what: round(s, 3) for (p, what), s in sorted(walls.items()) if p == n}
            passes.append({"pass": n + 1, "phases": phases, "frameworks": frameworks})
        running = self.in_flight()
        return {"passes": passes, **({"in_flight": running} if running else {})}


@dataclass
class _Frame:
    what: str
    began: float
    nested: float = 0.0


class _Account(threading.local):
    sheet: Timesheet | None = None
    pass_no: int = 0
    framework: str = HARNESS
    stack: list[_Frame]

    def __init__(self) -> None:
        self.stack = []


_current = _Account()


@contextlib.contextmanager
def account(sheet: Timesheet | None, pass_no: int, framework: str) -> Iterator[None]:
    """This thread's ``spend`` calls charge ``sheet``'s (pass, framework) until the block
    ends (None: they charge nothing)."""
    saved = (_current.sheet, _current.pass_no, _current.framework, _current.stack)
    _current.sheet, _current.pass_no, _current.framework = sheet, pass_no, framework
    _current.stack = []
    try:
        yield
    finally:
        _current.sheet, _current.pass_no, _current.framework, _current.stack = saved


@contextlib.contextmanager
def spend(what: str) -> Iterator[None]:
    """Charge the block's seconds, less those of the ``spend`` blocks inside it, to ``what``
    on this thread's account."""
    if _current.sheet is None:
        yield
        return
    frame = _Frame(what, time.perf_counter())
    stack = _current.stack
    stack.append(frame)
    sheet, me, outer = _current.sheet, threading.get_ident(), None
    if len(stack) == 1:  # this account's first open block (an account may open inside another)
        with sheet._lock:
            outer = sheet._open.get(me)
            sheet._open[me] = (_current.pass_no, _current.framework, stack)
    try:
        yield
    finally:
        elapsed = time.perf_counter() - frame.began
        stack.pop()
        if stack:
            stack[-1].nested += elapsed
        else:
            with sheet._lock:
                if outer is None:
                    sheet._open.pop(me, None)
                else:
                    sheet._open[me] = outer
        if _current.sheet is not None:
            _current.sheet.add(_current.pass_no, _current.framework, what,
                               elapsed - frame.nested)


def charge(what: str, seconds: float, *, instead_of: str | None = None) -> None:
    """Charge ``seconds`` measured elsewhere (a worker's compile time, the rounds' own clock)
    to ``what``, taken from ``instead_of`` (the activity whose block contained them) if named."""
    sheet = _current.sheet
    if sheet is None or seconds <= 0:
        return
    sheet.add(_current.pass_no, _current.framework, what, seconds)
    if instead_of is not None:
        sheet.add(_current.pass_no, _current.framework, instead_of, -seconds)


# -- reading a saved sheet -------------------------------------------------------------------------

def totals(sheet: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """{framework: {activity: seconds}} over every pass of a sheet's JSON."""
    found: dict[str, dict[str, float]] = {}
    for one in sheet.get("passes", ()):
        for fw, spent in one.get("frameworks", {}).items():
            mine = found.setdefault(fw, {})
            for what, s in spent.items():
                mine[what] = mine.get(what, 0.0) + float(s)
    return found


def lines(sheet: Mapping[str, Any]) -> list[str]:
    """The sheet as two tables: seconds per activity by pass, with each pass's phases'
    walls, then by framework over every pass."""
    passes = _numbered(sheet.get("passes", ()))
    cut = [f"still running as the run ended: pass {f.get('pass', '?')}, "  # a run cut short
           f"{'harness' if f.get('framework') == HARNESS else f.get('framework', '?')}: "
           f"{ACTIVITIES.get(f.get('activity'), f.get('activity', '?'))} for "
           f"{float(f.get('seconds', 0.0)):.1f} s" for f in sheet.get("in_flight", ())]
    if not passes:
        return cut or ["nothing was recorded (the run ended before its first pass)"]
    harness = "harness (no framework's)"
    header = ["seconds spent on", *(f"pass {p['pass']}" for p in passes), "all"]
    rows = []
    by_pass = [_sum_frameworks(p) for p in passes]
    for what, label in ACTIVITIES.items():
        found = [b.get(what, 0.0) for b in by_pass]
        if any(found):
            rows.append([label, *(f"{s:.1f}" for s in found), f"{sum(found):.1f}"])
    rows.append(["(all activities, jobs side by side)",
                 *(f"{sum(b.values()):.1f}" for b in by_pass),
                 f"{sum(sum(b.values()) for b in by_pass):.1f}"])
    recorded = [b.get("timed", 0.0) for b in by_pass]
    # a session that times nothing runs its one audited round in an untimed phase: no ratio
    timed_phase = any(float(p.get("phases", {}).get("timed", 0.0)) for p in passes)
    if any(recorded) and timed_phase:
        unrecorded = [sum(b.get(w, 0.0) for w in UNRECORDED) for b in by_pass]
        rows.append(["timed work not recorded, over recorded",
                     *(_ratio(u, r) for u, r in zip(unrecorded, recorded, strict=True)),
                     _ratio(sum(unrecorded), sum(recorded))])
    for what, label in PHASES.items():
        walls = [float(p.get("phases", {}).get(what, 0.0)) for p in passes]
        if any(walls):
            rows.append([f"wall: {label}", *(f"{s:.1f}" for s in walls), f"{sum(walls):.1f}"])
    out = [*render(header, rows), *cut]
    per_fw = totals(sheet)
    used = [w for w in ACTIVITIES if any(v.get(w) for v in per_fw.values())]
    header = ["framework", *used, "all"]
    rows = [[harness if fw == HARNESS else fw, *(f"{spent.get(w, 0.0):.1f}" for w in used),
             f"{sum(spent.values()):.1f}"] for fw, spent in sorted(per_fw.items())]
    return [*out, "", *render(header, rows)]


def _ratio(unrecorded: float, recorded: float) -> str:
    return f"{unrecorded / recorded:.2f}" if recorded else "-"


def empty_passes(sheet: Mapping[str, Any]) -> list[int]:
    """The numbers of the passes a sheet holds with nothing in them: no activity and no
    phase. A campaign's sheet never holds one (``to_json`` writes a pass once something was
    charged to it), so one is a sheet cut or edited, and a table of it would show zeros."""
    return [int(p["pass"]) for p in _numbered(sheet.get("passes", ()))
            if not p.get("phases") and not any((p.get("frameworks") or {}).values())]


def _numbered(passes: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every pass a sheet holds, numbered: one saved without its number (or empty: a pass that
    recorded nothing) takes its place's, and shows as zero seconds."""
    return [{**one, "pass": one.get("pass", i + 1)} for i, one in enumerate(passes)]


def _sum_frameworks(one: Mapping[str, Any]) -> dict[str, float]:
    found: dict[str, float] = {}
    for spent in one.get("frameworks", {}).values():
        for what, s in spent.items():
            found[what] = found.get(what, 0.0) + float(s)
    return found
