"""The campaign's progress lines: a group checked (and timed), how long the session has left
(from what earlier passes and cases took, saying when it is a guess), and what a long case is
about to do."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

LONG_S = 10.0  # a case whose timing is expected to take longer says so as it starts


@dataclass
class Progress:
    """The progress lines, and the time left foretold from what earlier passes and cases took.

    A later process is foretold from the last one: each group's seconds into the pass are
    kept, so process p's time to reach a group against process p - 1's gives its pace, and
    what is left is the last process's rest of the pass, and its whole length for each pass to
    come, at that pace. The first process has nothing to go by (it also computes the
    references, compiles cold and fills the compile caches, about 1.7 times a later process's
    time on the main job here), so its own rest is foretold from its cases so far, and the
    line says that is a guess; so is a session's that times nothing (one pass)."""

    write: Callable[[str], None]
    groups: int  # comparison groups a pass goes through
    passes: int  # processes a case (1 when nothing is timed)
    started: float  # time.monotonic() as the campaign started
    first_pass_s: float | None = None  # how long the first pass took, once it has
    cases: int = 0  # cases a pass goes through (0: not known, the first guess counts groups)
    # per pass, each group done: its seconds into the pass, and its cases
    _into: list[dict[str, float]] = field(default_factory=list)
    _began: list[float] = field(default_factory=list)  # when each pass began
    _sizes: dict[str, int] = field(default_factory=dict)
    _first_begun: float | None = None  # when the first group began (after pools started)
    _last: float = 0.0  # when the last group was done

    def group_done(self, p: int, name: str, begun: float, count: int, done: int,
                   timed: bool = True, verdicts: Sequence[tuple[str, str]] = ()) -> None:
        """Group ``name`` of pass ``p`` is done (``count`` cases timed), the ``done``-th
        group of the session. ``verdicts``, its cases' (status, message) so far (failed,
        skipped, error; anything else is passing), are counted on the line and each failure's
        first line follows it, so that a session cut short (a borrowed machine's window)
        still says what its finished groups found."""
        self.note(p, name, begun, len(verdicts) or count)
        what = f"{count} case(s) checked and timed" if timed else "checked"
        statuses = [status for status, _ in verdicts]
        self.write(f"mlbench [process {p + 1}/{self.passes}] {name}: {what} in "
                   f"{time.monotonic() - begun:.1f} s{tally(statuses)}; "
                   f"{self.eta(done, p, name)}")
        for status, message in verdicts:
            if status in ("failed", "error"):
                first = (message.strip().splitlines() or [""])[0]
                self.write(f"mlbench   {status}: {first[:300]}")

    def note(self, p: int, name: str, begun: float, cases: int) -> None:
        """Group ``name`` of pass ``p``, begun at ``begun`` with ``cases`` cases, is done now."""
        now = time.monotonic()
        while len(self._began) <= p:  # a pass begins as the one before it ended
            self._began.append(self._last if self._began else self.started)
            self._into.append({})
        self._into[p][name] = now - self._began[p]
        self._sizes[name] = cases
        self._first_begun = min(begun, self._first_begun or begun)
        self._last = now

    def eta(self, done: int, p: int, name: str | None = None) -> str:
        """Time spent, and what is left after ``done`` groups, the last of them ``name`` in
        pass ``p``."""
        spent = time.monotonic() - self.started
        if done >= self.groups * self.passes:
            return f"{spent:.0f} s in all"
        later = self._from_last_pass(p, name)
        if later is not None:
            return f"{spent:.0f} s so far, about {later:.0f} s left (at this process's pace " \
                   "against the last one's)"
        if p == 0 and self.passes > 1 and done >= self.groups:
            return (f"{spent:.0f} s so far, the first process done; {self.passes - 1} faster "
                    "process(es) to come")
        left, basis = self._first_guess(done, spent) if p == 0 else (
            spent / max(done, 1) * (self.groups * self.passes - done), f"{done} group(s) done")
        if p == 0 and self.passes > 1:
            return (f"{spent:.0f} s so far, about {left:.0f} s left in the first process (a "
                    f"guess from its {basis}); {self.passes - 1} faster process(es) to come")
        return f"{spent:.0f} s so far, about {left:.0f} s left (a guess from the {basis})"

    def _from_last_pass(self, p: int, name: str | None) -> float | None:
        """Seconds left at pass ``p``'s pace against pass p - 1's, once group ``name`` is done
        in both; None in the first pass."""
        if p == 0 or p >= len(self._into) or name not in self._into[p - 1] \
                or name not in self._into[p]:
            return None
        last, mine = self._into[p - 1], self._into[p][name]
        length, reached = max(last.values()), last[name]
        pace = mine / reached if reached > 0 else 1.0
        return pace * (length - reached + (self.passes - p - 1) * length)

    def _first_guess(self, done: int, spent: float) -> tuple[float, str]:
        """The first pass's rest from its pace so far (its start-up, the probe and the pools,
        left out: it comes once): per case when the campaign said how many, else per group."""
        work = spent - ((self._first_begun or self.started) - self.started)
        finished = self._into[0] if self._into else {}
        cases = sum(self._sizes.get(g, 0) for g in finished)
        if self.cases and cases:
            return work / cases * max(self.cases - cases, 0), f"{cases} case(s) done"
        return work / max(done, 1) * (self.groups - done), f"{done} group(s) done"

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
