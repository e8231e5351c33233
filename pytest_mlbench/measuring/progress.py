"""The campaign's progress lines: a group checked (and timed), how long the session has left,
and what a long case is about to do."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

LONG_S = 10.0  # a case whose timing is expected to take longer says so as it starts


@dataclass
class Progress:
    write: Callable[[str], None]
    groups: int  # comparison groups a pass goes through
    passes: int  # processes a case (1 when nothing is timed)
    started: float  # time.monotonic() as the campaign started
    first_pass_s: float | None = None  # how long the first pass took, once it has

    def group_done(self, p: int, name: str, begun: float, count: int, done: int,
                   timed: bool = True, verdicts: Sequence[tuple[str, str]] = ()) -> None:
        """Group ``name`` of pass ``p`` is done (``count`` cases timed), the ``done``-th
        group of the session. ``verdicts``, its cases' (status, message) so far (failed,
        skipped, error; anything else is passing), are counted on the line and each failure's
        first line follows it, so that a session cut short (a borrowed machine's window)
        still says what its finished groups found."""
        what = f"{count} case(s) checked and timed" if timed else "checked"
        statuses = [status for status, _ in verdicts]
        self.write(f"mlbench [process {p + 1}/{self.passes}] {name}: {what} in "
                   f"{time.monotonic() - begun:.1f} s{tally(statuses)}; {self.eta(done, p)}")
        for status, message in verdicts:
            if status in ("failed", "error"):
                first = (message.strip().splitlines() or [""])[0]
                self.write(f"mlbench   {status}: {first[:300]}")

    def eta(self, done: int, p: int) -> str:
        """Time spent, and what is left. The first process of a timed session also computes
        the references, compiles cold and fills the compile caches (about 1.7 times a later
        process's time on the main job here), so while it runs only its own rest is foretold,
        and the later processes' rest from the later processes' pace."""
        total = self.groups * self.passes
        spent = time.monotonic() - self.started
        if done >= total:
            return f"{spent:.0f} s in all"
        if p == 0 and self.passes > 1:
            more = f"{self.passes - 1} faster process(es) to come"
            if done >= self.groups:
                return f"{spent:.0f} s so far, the first process done; {more}"
            left = spent / max(done, 1) * (self.groups - done)
            return f"{spent:.0f} s so far, about {left:.0f} s left in the first process; {more}"
        later = spent - (self.first_pass_s or 0.0)
        pace = later / max(done - (self.groups if self.passes > 1 else 0), 1)
        return f"{spent:.0f} s so far, about {pace * (total - done):.0f} s left"

    def long_case(self, p: int, name: str, round_s: float, rounds: int,
                  compile_s: float | None) -> None:
        """A case whose rounds are expected to take more than LONG_S (paper sizes) says what
        it will do, and about how long it takes."""
        expected = round_s * rounds
        if expected > LONG_S:
            compiled = f", compiled in {compile_s:.1f} s" if compile_s else ""
            self.write(f"mlbench [process {p + 1}/{self.passes}] {name}: checked{compiled}; "
                       f"timing {rounds} round(s) of about {round_s:.1f} s "
                       f"(about {expected:.0f} s)")


def tally(verdicts: Sequence[str]) -> str:
    """`` (3 passing, 1 failed)``: the statuses of a group's cases, or "" for none."""
    if not verdicts:
        return ""
    counts = Counter(v if v in ("failed", "skipped", "error") else "passing" for v in verdicts)
    order = ("passing", "failed", "error", "skipped")
    return " (" + ", ".join(f"{counts[k]} {k}" for k in order if counts[k]) + ")"
