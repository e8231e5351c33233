"""The named jobs over the catalogue: which cases each marker selects, and how long a job
should take on this host.

    -m mlbench_main    tox -e bench            each workload's headline comparison: its headline
                                               shape and task, every installed framework in its
                                               plain modes (eager, jit, xla), one worker
    -m mlbench_idioms  tox -e bench-idioms     the idioms (jit+sdpa, +donate, the layer
                                               libraries, scans, ...) beside the plain modes of
                                               the workloads that have them
    -m mlbench_scale   tox -e bench-scale      the parallel layouts of the spec's
                                               ``main_strategies`` beside the one-worker cases
                                               they scale from (the scaling table's 1.00)
                       tox -e bench-precision  the main job at fp64, bf16 and amp
                       tox -e bench-all        the whole catalogue

Every job keeps every check of every case; they differ in which cases they run. A marker is
only a selection: ``-m "mlbench_main or mlbench_idioms"`` runs both in one session, one table.
Imported by plugin.py at start-up: nothing heavy at module level.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_mlbench import variants

if TYPE_CHECKING:
    from pytest_mlbench.workloads.case import CaseId
    from pytest_mlbench.workloads.spec import Workload

MAIN, IDIOMS, SCALE = "mlbench_main", "mlbench_idioms", "mlbench_scale"
MARKERS = {
    MAIN: "a case of the main job (tox -e bench): each workload's headline shape and task in "
          "every framework's plain modes (eager, jit, xla), one worker",
    IDIOMS: "a case of the idioms job (tox -e bench-idioms): the headline's idiom variants "
            "(jit+sdpa, +donate, layer libraries, scans) beside the plain modes",
    SCALE: "a case of the scaling job (tox -e bench-scale): the headline's parallel layouts "
           "beside the one-worker cases they scale from",
}

# The pace a job's estimate starts from: seconds of wall a case takes in the first process
# (cold: compiling; warm: loading from the compile cache) and in each later one, and a pass's
# worker start, on the reference host (2 cores, Python-loop probe 3.9 ms): the main job of
# 143 cases took 829 s at 3 processes (docs/journal/2026-11-26-amd-host-time-spent.md);
# the warm figures are the cold ones less the compilation that journal counted.
REFERENCE_LOOP_MS = 3.9
FIRST_COLD_S, FIRST_WARM_S, LATER_COLD_S, LATER_WARM_S = 2.35, 1.35, 1.54, 1.25
START_FIRST_S, START_LATER_S = 19.0, 7.0


def markers(cid: CaseId) -> list[str]:
    """The jobs ``cid`` belongs to (none unless at its workload's headline shape and task)."""
    if not (cid.shape.main and cid.task.main):
        return []
    plain = not variants.idiom(cid.variant)
    workload, found = cid.workload, []
    if plain and not cid.strategy:
        found.append(MAIN)
    if not cid.strategy and (not plain or has_idioms(workload)):
        found.append(IDIOMS)
    scales = set(workload.strategies(cid.framework, cid.variant)) & set(
        workload.main_strategies)
    if cid.strategy in workload.main_strategies or (not cid.strategy and plain and scales):
        found.append(SCALE)
    return found


def has_idioms(workload: Workload) -> bool:
    return any(variants.idiom(v) for vs in workload.implementations.values() for v in vs)


def estimate(cases: int, warm: int, processes: int, loop_ms: float) -> float:
    """Seconds a timed session of ``cases`` (``warm`` of them compiled into the compile cache
    already) should take at ``processes`` processes on a host whose Python loop reads
    ``loop_ms`` (the reference host's pace, scaled)."""
    cold = cases - warm
    first = START_FIRST_S + cold * FIRST_COLD_S + warm * FIRST_WARM_S
    later = START_LATER_S + cold * LATER_COLD_S + warm * LATER_WARM_S
    return (first + max(processes - 1, 0) * later) * loop_ms / REFERENCE_LOOP_MS


def estimate_line(cases: int, warm: int, processes: int, loop_ms: float) -> str:
    seconds = estimate(cases, warm, processes, loop_ms)
    cache = (f"{warm} of {cases} compiled in the compile cache already" if warm
             else "an empty compile cache: it compiles every case cold")
    return (f"mlbench: {cases} case(s) x {processes} process(es): about "
            f"{_minutes(seconds)} on this host ({cache}); an estimate, from the reference "
            f"host's pace scaled by this host's Python loop ({loop_ms:.1f} ms against "
            f"{REFERENCE_LOOP_MS} ms)")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"

