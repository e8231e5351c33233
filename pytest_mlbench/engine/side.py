"""Where a worker's code comes from (a leaf: measuring/plan.py and engine/pools.py share it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Side:
    """Where a worker's code comes from: this environment (the default) or, for the A/B
    gate, another revision's tree (``path``) or another environment's interpreter."""

    name: str = ""
    python: str = ""
    path: tuple[str, ...] = ()
    root: str = ""  # the suites folder on this side
