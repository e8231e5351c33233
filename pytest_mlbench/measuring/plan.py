"""How a campaign measures (Plan) and what it measures (Lane: one side's cases, Side: where
that side's worker code comes from). Plain values, imported by the campaign, by what a case
collects (measuring/outcome.py) and by the session that makes them; they import nothing that
imports them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_mlbench.engine.side import Side

if TYPE_CHECKING:
    from pytest_mlbench.workloads.case import CaseId
    from pytest_mlbench.workloads.catalogue import Catalogue

__all__ = ["Lane", "Plan", "Side"]


@dataclass(frozen=True)
class Plan:
    """How the campaign measures."""

    timing: bool  # False: --benchmark-disable (check everything, time nothing)
    processes: int
    threads: int
    affinity: str
    seed: int
    size: str
    max_time: float  # seconds of timed rounds per case, over all passes
    min_rounds: int  # recorded rounds per case, over all passes
    compile_cache: str = "cold"  # the compile cache kept across sessions, or "cold"
    hosts: str = "local"  # "external": parallel cases' workers are ones a launcher started
    listen: str = "127.0.0.1:0"  # where the session waits for them (HOST:PORT)
    external_wait_s: float = 300.0  # how long a pool waits for its external workers


@dataclass(frozen=True)
class Lane:
    """One side's cases: this revision's (the default side) or, for A/B, the base's."""

    side: Side
    catalogue: Catalogue
    cases: tuple[CaseId, ...]
