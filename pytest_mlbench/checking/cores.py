"""Fair while timed (issue 56): the cores a timed round used, and the thread controls, CPU
affinity, threads and child processes its worker holds, against what the session set.

The threads are verified before timing (asserts.assert_threads); these checks hold the rule
while the clock runs. A worker's turn runs with every thread placed on the case's cores, so
an honest round cannot use more of them than it has: a round that did left the cores (an
affinity widened, a child process started elsewhere), and is judged by its CPU time over its
wall time, whatever the framework's own threads (interop pools, dispatch threads, XLA's and
TensorFlow's pools) do inside the cores. The worker reads (engine/usage.py); this module judges,
each finding one clause of one line:

- ``assert_turn``: after every turn, every round's cores used (its threads' CPU time over its
  wall time, and its child processes' over the turn) within the case's threads times
  (1 + MARGIN); no thread control set to another count while timed, nor changed when the
  turn ends; no thread, nor child process that ran, allowed past the case's cores. Threads
  and child processes held that were not when timing began are named with any finding.
- ``assert_controls_kept``: at a case's end, every control the framework reports (the full
  read, every BLAS and OpenMP library loaded by then) as the session set it.

A GPU case's worker runs on every core of the session and its rounds' host CPU is not judged
(the thread rule is for CPU compute, docs/MEASURING.md); its controls and affinity are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_mlbench.engine import protocol as p

# A round's cores may exceed the case's threads by this share. Confined to its cores an honest
# round cannot use more of them: what it reads past 1.00 is the few microseconds between the
# CPU clock's readings and the wall clock's (the largest honest ratio, 1.016 over 95 process
# figures of every framework, 2026-11-28: docs/MEASURING.md, "Equal threads")
MARGIN = 0.10
# and by this much CPU time in any round: the readings on either side of a short round (a
# smoke shape's rounds last tens of microseconds in a session that times nothing)
SLACK_S = 50e-6
SHOWN = 4  # names shown of a list
# a reply that says nothing of its turn (a worker that reads no usage): its rounds' own CPU
NOTHING_READ = p.TurnUsage(span=0.0, children_cpu=0.0, children={}, widened={}, cores=[],
                           controls={}, set_while_timed={}, new_threads={}, new_processes={})


def cores_used(rounds: Sequence[p.RoundRan],
               usage: p.TurnUsage) -> list[tuple[float, float, float]]:
    """Per round of one worker's turn: the cores its threads used (CPU time over the wall time
    it was read over), those its child processes used over the turn (live and reaped, over
    the turn's span: a child's CPU is read as a turn begins and ends, not per round), and
    that wall time; nothing where a round's were not read."""
    children = usage.children_cpu / usage.span if usage.span > 0 else 0.0
    found = []
    for r in rounds:
        if r.cpu is None or r.cpu_wall is None:
            return []
        found.append((r.cpu / max(float(r.cpu_wall), 1e-9), children, float(r.cpu_wall)))
    return found


def assert_turn(ranks: Sequence[Sequence[p.RoundRan]], numbers: Sequence[int], *,
                threads: int, device: str, where: str) -> float:
    """Every rank's turn (its replies to the rounds ``numbers``, the last round's ``usage``
    the turn's) within the case's ``threads`` and the session's controls; returns the
    largest ratio of cores used to ``threads`` over its rounds."""
    worst = 0.0
    for rank, rounds in enumerate(ranks):
        usage = rounds[-1].usage or NOTHING_READ
        used = cores_used(rounds, usage)
        found = [_cores(used, usage, numbers, threads)] if device == "cpu" else []
        found += _held(usage, threads)
        problems = [f for f in found if f]
        if problems:
            named = _named(usage)
            label = f" (rank {rank})" if len(ranks) > 1 else ""
            raise AssertionError(f"{where}{label} timed turn of rounds {numbers[0]}-"
                                 f"{numbers[-1]}: " + "; ".join([*problems, *named]))
        worst = max([worst, *((t + c) / threads for t, c, _ in used)])
    return worst


def _cores(used: Sequence[tuple[float, float, float]], usage: p.TurnUsage,
           numbers: Sequence[int], threads: int) -> str:
    """The round that used the most cores past the case's, if any did."""
    over = []
    for i, (own, children, wall) in enumerate(used):
        bound = threads * (1 + MARGIN) + SLACK_S / max(wall, 1e-9)
        if own + children > bound:
            over.append((own + children - bound, i, own, children, bound))
    if not over:
        return ""
    _, i, own, children, bound = max(over)
    return (f"round {numbers[i]} used {own + children:.2f} cores where the case has {threads} "
            f"thread(s) (at most {bound:.2f} with the margin): {own:.2f} in the worker's "
            f"threads, {children:.2f} in its child processes"
            + (f" ({_names(usage.children)} ran)" if usage.children else ""))


def _held(usage: p.TurnUsage, threads: int) -> list[str]:
    found = []
    if usage.set_while_timed:
        calls = ", ".join(f"{what} ({n} call{'s' if n > 1 else ''})"
                          for what, n in sorted(usage.set_while_timed.items()))
        found.append(f"thread controls set while timed: {calls}, where the session set "
                     f"{threads} thread(s) on cores {usage.cores}")
    found += [f"{what} reads {now} after the turn, {was} as the session set it"
              for what, (now, was) in sorted(usage.controls.items())]
    found += [f"{who} may run on cores {mask}, the case's are {usage.cores}"
              for who, mask in sorted(usage.widened.items())]
    return found


def _named(usage: p.TurnUsage) -> list[str]:
    """Threads and child processes held now that were not when timing began."""
    found = []
    if usage.new_threads:
        found.append(f"{len(usage.new_threads)} thread(s) held that were not when timing "
                     f"began: {_names(usage.new_threads)}")
    if usage.new_processes:
        found.append(f"{len(usage.new_processes)} child process(es) held that were not when "
                     f"timing began: {_names(usage.new_processes)}")
    return found


def _names(ids: Mapping[int, str]) -> str:
    shown = [f"{i} ({name})" for i, name in sorted(ids.items())[:SHOWN]]
    more = len(ids) - SHOWN
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def assert_controls_kept(before: Mapping[str, Any], after: Mapping[str, Any], threads: int,
                         *, where: str = "") -> None:
    """At a case's end, every thread control the framework reports (``after``, the adapter's
    full read: every BLAS and OpenMP library loaded by then) as the session set it: a count
    read before timing (``before``) unchanged, a library loaded since at no more than
    ``threads`` (an OpenMP runtime a framework loads late sizes itself from the cores: the
    gpt JAX cases at four workers on two cores read libgomp at 2 where the session gave 4),
    any other value (a policy's interop count) as read before timing."""
    changed = []
    for what, now in sorted(after.items()):
        if isinstance(now, int) and not isinstance(now, bool):
            if what in before and now != before[what]:
                changed.append(f"{what}={now} ({before[what]} before timing)")
            elif what not in before and now > threads:
                changed.append(f"{what}={now} (the session set {threads})")
        elif what in before and now != before[what]:
            changed.append(f"{what}={now} ({before[what]} before timing)")
    if changed:
        raise AssertionError(f"{where}: thread controls changed by the end of timing: "
                             + ", ".join(changed))
