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


@dataclass(frozen=True)
class Lane:
    """One side's cases: this revision's (the default side) or, for A/B, the base's."""

    side: Side
    catalogue: Catalogue
    cases: tuple[CaseId, ...]
