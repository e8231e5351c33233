"""What a campaign does with the compile cache kept across runs (storing/compile_cache.py):
which caches each pass's workers read, what each case's compile figure came from, and what the
folder remembers afterwards (storing/cold_compiles.py).

torch's inductor and numba read and write the folder in every pass of every session: a case
that one process compiled, the next loads. JAX's and TensorFlow's XLA caches are kept apart in
timed sessions, because an executable loaded from JAX's ran 7-25% faster in a worker than the
same program compiled in it (engine/pools.compile_caches): a run's processes must all load or
all compile. So when every case of such a framework was compiled into the folder before (the
ledger's ``filled``), it loads from it in every pass (``warm``); otherwise each of its processes
compiles, the first pass writing what it compiled to a folder of the session that is added to
the kept one after the pass, so that the next run loads it all. A session that times nothing
reads and writes every cache, XLA's too. TensorFlow's XLA cache serves only XLA's backend
compile: its tracing and its lowering to HLO run in every process (engine/pools.compile_caches;
docs/journal/2026-11-28-tensorflow-xla-cache.md).

A case's compile figure (the first process's) came ``from the cache`` when the worker's own
counts say every compilation it needed was loaded (adapters' ``persistent_cache``), else it is
cold; an adapter that keeps no count is cold. A figure from the cache is reported with the
case's cold figure, as the run that compiled it measured it (the ledger);
``--mlbench-compile-cache=cold`` makes every figure cold.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_mlbench import variants
from pytest_mlbench.storing import cold_compiles, compile_cache
from pytest_mlbench.storing.cold_compiles import Ledger

if TYPE_CHECKING:  # the job's estimate reads this module at collection: nothing heavy
    from pytest_mlbench.measuring.outcome import CaseState
    from pytest_mlbench.measuring.plan import Lane
    from pytest_mlbench.workloads.case import CaseId
    from pytest_mlbench.workloads.catalogue import Catalogue

__all__ = ["CachePlan"]

FROM_CACHE, COLD = "cache", "cold"  # Measure.compiled_from


@dataclass
class CachePlan:
    setting: str  # the kept folder, or compile_cache.COLD
    session: str  # the session's temporary folder (the cold caches, the XLA fill)
    timing: bool
    write: Callable[[str], None] = lambda line: None
    ledger: Ledger | None = None
    warm: dict[str, bool] = field(default_factory=dict)  # "jax" -> its XLA loads in every pass
    fills: dict[str, str] = field(default_factory=dict)  # case name -> what it was compiled from

    @property
    def folder(self) -> str:
        """The kept folder, or "" for a cold session."""
        return "" if self.setting == compile_cache.COLD else self.setting

    def open(self, lanes: Sequence[Lane]) -> None:
        """Before the first pass: set aside what cannot be read, read the ledger, and decide
        per XLA framework whether it loads (never under A/B: the base's code compiles too)."""
        if not self.folder:
            return
        self.ledger, unread = Ledger.load(self.folder)
        if unread:
            self.write(unread)
        for framework, line in compile_cache.check(self.folder):
            self.ledger.forget(framework)
            self.write(line)
        cases = lanes[0].cases
        self.fills = fill_keys(lanes[0].catalogue, cases)
        filled = {c.name for c in cases if self.ledger.filled(self._key(c), self.fills[c.name])}
        for framework in compile_cache.XLA:
            own = {cid.name for cid in cases if cid.framework == framework}
            if own:
                self.warm[framework] = len(lanes) == 1 and own <= filled
        self.write(self._opening(len(filled), len(cases)))

    def _opening(self, filled: int, cases: int) -> str:
        xla = [f for f, ran in self.warm.items() if ran]
        cold = [f for f, ran in self.warm.items() if not ran]
        how = (f"{', '.join(xla)} loads XLA's in every process" if xla else "") + (
            "; " if xla and cold else "") + (
            f"{', '.join(cold)} compiles in every process this run, kept for the next"
            if cold and self.timing else "")
        return (f"mlbench: compile cache {self.folder}: {filled} of {cases} case(s) compiled "
                f"there before" + (f" ({how})" if how else ""))

    def kept(self) -> str:
        """The folder torch's and numba's caches live in ("" for the session's own)."""
        return self.folder

    def xla(self, p: int) -> dict[str, str]:
        """Per XLA framework, the folder its workers' XLA cache is in during pass ``p`` ("":
        none, they compile)."""
        if not self.folder:
            return {}
        if not self.timing:
            return dict.fromkeys(compile_cache.XLA, self.folder)
        return {f: self.folder if warm else (self._fill() if p == 0 else "")
                for f, warm in self.warm.items()}

    def _fill(self) -> str:
        return os.path.join(self.session, "xla-fill")

    def first_pass_done(self) -> None:
        """What the first pass's XLA compiled, added to the kept folder for the next run."""
        if self.folder and self.timing and os.path.isdir(self._fill()):
            compile_cache.merge(self._fill(), self.folder,
                                tuple(f for f, warm in self.warm.items() if not warm))

    def judged(self, cid: CaseId, counts: tuple[int, int] | None) -> str:
        """What the case's compile figure came from: "cache", "cold", or "" (an eager case
        compiles nothing of its own)."""
        mode = variants.mode(cid.variant)
        if mode == "eager":
            return ""
        if not self.folder:
            return COLD
        if counts is None:  # the adapter keeps no count: no cache was given to it
            return COLD
        loaded, compiled = counts
        return FROM_CACHE if loaded > 0 and compiled == 0 else COLD

    def close(self, states: Iterable[CaseState]) -> None:
        """After the last pass: a figure that came from the cache gets the case's cold one;
        each case of this side that went through its first pass was compiled into the folder,
        and a cold figure is kept."""
        if self.ledger is None:
            return
        done = [s for s in states if s.alive and not s.lane.side.name]
        for state in done:
            if state.compiled_from == FROM_CACHE:
                state.cold_compile_s = self.ledger.cold_s(self._key(state.cid),
                                                          state.cid.framework)
        for state in done:
            cold = state.compile_s if self.timing and state.compiled_from == COLD else None
            self.ledger.note(self._key(state.cid), state.cid.framework,
                             self.fills.get(state.cid.name, ""), cold or None)
        self.ledger.save()

    def _key(self, cid: CaseId) -> str:
        return cold_compiles.case_key(cid.name, cid.shape.dims)


def fill_keys(catalogue: Catalogue, cases: Iterable[CaseId]) -> dict[str, str]:
    """What each case is compiled from (cold_compiles.fill_key), by name."""
    digests: dict[tuple[str, ...], str] = {}
    out = {}
    for cid in cases:
        folders = _sources(catalogue, cid)
        code = digests.setdefault(folders, cold_compiles.folder_digest(map(Path, folders)))
        out[cid.name] = cold_compiles.fill_key(cid.framework, code)
    return out


def filled(folder: str, catalogue: Catalogue, cases: Sequence[CaseId]) -> int:
    """How many of ``cases`` a run compiled into ``folder`` already (read only: the job's
    estimate, jobs.py)."""
    if folder == compile_cache.COLD:
        return 0
    ledger = Ledger.peek(folder)
    keys = fill_keys(catalogue, cases) if ledger.entries else {}
    return sum(ledger.filled(cold_compiles.case_key(c.name, c.shape.dims), keys[c.name])
               for c in cases if c.name in keys)


def _sources(catalogue: Catalogue, cid: CaseId) -> tuple[str, ...]:
    """The folders a case's code comes from: its workload's, and the one its implementations
    come from (``implementations_from``)."""
    folder = catalogue.folder(cid.workload.name)
    source = cid.workload.implementations_from
    return (str(folder),) + ((str(folder.parent / source),) if source else ())
