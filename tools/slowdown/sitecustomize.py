"""Makes every timed round of this side's workers ``MLBENCH_SLOWDOWN`` times slower, for
calibrating the gates (tools/calibrate_gate.py); nothing is edited in any workload.

Python imports ``sitecustomize`` at start-up from its path. The calibration puts this folder on
the path of the head side only (the A/B base side runs with its own path), so only the head's
rounds slow down: after a round's work is synchronised, the timed region busy-waits (keeping a
core as busy as real work would) for the given fraction of the round's own duration.
"""

from __future__ import annotations

import os
import time

FACTOR = float(os.environ.get("MLBENCH_SLOWDOWN", "0") or 0)

if FACTOR > 0:
    from pytest_mlbench.engine import runners

    _original = runners.timed_round

    def _slowed(*args, **kwargs):  # type: ignore[no-untyped-def]  # whatever timed_round takes
        seconds, outs, tail = _original(*args, **kwargs)
        start = time.perf_counter()
        end = start + FACTOR * seconds
        while time.perf_counter() < end:
            pass
        return seconds + (time.perf_counter() - start), outs, tail

    runners.timed_round = _slowed
