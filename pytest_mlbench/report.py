"""Tables of step times normalised to the fastest implementation, as the seed article printed."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pytest_mlbench.timing import Result


def normalised_table(results: Iterable[Result], reference: str | None = None) -> list[str]:
    """One block per comparison group, rows fastest first; ``reference`` (``jax-jit``) sets the
    1.0 when present in the group, otherwise the fastest does."""
    groups: dict[str, list[Result]] = defaultdict(list)
    for result in results:
        groups[result.group].append(result)
    lines = []
    for group in groups:  # first-seen order: collection order keeps d2 before d10
        rows = sorted(groups[group], key=lambda r: r.step_s)
        base = next((r.step_s for r in rows if r.impl == reference), rows[0].step_s)
        lines.append(f"{group}")
        lines.append(f"  {'implementation':<20} {'step (ms)':>11} {'normalised':>10} "
                     f"{'GFLOP/s':>9} {'compile (s)':>12}")
        for r in rows:
            lines.append(f"  {r.impl:<20} {r.step_s * 1e3:>11.4f} {r.step_s / base:>10.2f} "
                         f"{r.gflops:>9.2f} {r.compile_s:>12.3f}")
    return lines
