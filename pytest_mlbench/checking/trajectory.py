"""The float64 reference trajectory from a seeded start, cached: what ``Reference.train``
computes from there, step by step (each on its step's batch where a pass draws them:
data.step_key), kept so that the checks before timing and every audited
round counted from the start (checking/phases.py) ask for steps instead of replaying them all.

A state of a large model is megabytes (a GPT's params and Adam's two slots), so only
checkpoints are kept, not every step; the cost of a query is bounded by the checkpoint
interval, and the memory of a trajectory by CHECKPOINT_BYTES.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from pytest_mlbench.timesheet import spend
from pytest_mlbench.workloads import data
from pytest_mlbench.workloads.optim import Optimizer
from pytest_mlbench.workloads.spec import Arrays

# steps between checkpoints: a query replays fewer than this. An audit asks for three steps
# around the one it checks, and a reference step of a float64 ViT costs ~0.25 s (an oracle
# call), so every step is kept while memory allows
CHECKPOINT_EVERY = 1
# beyond this a trajectory keeps every other checkpoint (a default-size GPT with Adam: every
# 4th step at most; the MLP keeps all 128 steps in 2 MB)
CHECKPOINT_BYTES = 256 << 20

State = tuple[Arrays, Arrays]  # (params, optimizer state), float64
# Reference.step: (optimizer, params, state, inputs, dtype, *, cached) -> (loss, params, state)
Step = Callable[..., tuple[float, Arrays, Arrays]]
Guard = Callable[[], contextlib.AbstractContextManager[Any]]


class Trajectory:
    """The reference's steps from one start with fresh optimizer state, each exactly as
    ``Reference.train`` takes it (step ``n`` is the state after ``n`` steps; the loss of step
    ``n`` is before it), computed once and extended as later steps are asked for.

    A state of a large model is megabytes, so only checkpoints are kept (every ``every`` steps,
    stored at the dtype: each state was rounded to it, so storing it there loses nothing) and
    the furthest state; any other step is replayed from the checkpoint before it, fewer than
    ``every`` steps. Checkpoints beyond CHECKPOINT_BYTES thin out (``every`` doubles). The
    gradients bypass the Reference's value cache, which a hundred steps would empty of every
    value the checks ask for again. One lock: a second thread asking for the same steps waits
    for them rather than computing them too.

    ``shared``: another trajectory from the same start and its first steps that are this
    one's (a pass's steps on the seeded data, before its first secret batch: the public
    trajectory's), taken from it rather than computed again."""

    def __init__(self, step: Step, optimizer: Optimizer, params: Arrays, inputs: Arrays,
                 dtype: Any, guard: Guard = contextlib.nullcontext,
                 batch_of: Callable[[int], Arrays] | None = None,
                 shared: tuple[Trajectory, int] | None = None) -> None:
        self.step, self.optimizer, self.dtype = step, optimizer, dtype
        # step n's batch (float64), n counted from 1 (data.step_key); None: ``inputs`` always
        self.batch_of = batch_of
        self.shared = shared
        self.guard = guard  # around each walk (one BLAS thread: once, not at every step)
        self.inputs = data.widen(inputs)
        start = data.widen(params)
        self.start: State = (start, optimizer.init_state(start))
        self.every = CHECKPOINT_EVERY
        self.checkpoints: dict[int, State] = {}  # at the dtype; step 0 is self.start
        self._bytes = 0  # the checkpoints' (summed as they come: a sum over them every step
        # made a long trajectory quadratic, most of a toy's 3 s count budget)
        self._head: tuple[int, State] = (0, self.start)  # the furthest step computed
        self._losses: list[float] = []  # as many as the head's step
        self._lock = threading.Lock()

    def losses(self, steps: int) -> list[float]:
        """The loss before each of the first ``steps`` steps."""
        with self._held(), self.guard():
            head, state = self._head
            for step in range(head, steps):
                state = self._advance(step, state)
            return self._losses[:steps]

    def state(self, step: int) -> State:
        """Params and optimizer state after ``step`` steps."""
        return self.states(step, step)[step]

    def states(self, first: int, last: int) -> dict[int, State]:
        """Params and optimizer state after each of ``first`` to ``last`` steps, inclusive
        (float64; shared with the trajectory: read them, do not modify them)."""
        if not 0 <= first <= last:
            raise ValueError(f"steps {first} to {last}: need 0 <= first <= last")
        with self._held(), self.guard():
            step, state = self._before(first)
            found = {}
            while True:
                if step >= first:
                    found[step] = state
                if step == last:
                    return found
                state = self._next(step, state)
                step += 1

    def _next(self, step: int, state: State) -> State:
        """The state after ``step + 1`` steps, from ``state`` after ``step``: kept (the head,
        a checkpoint), else computed (replaying a step a thinned trajectory did not keep, or
        growing it). A window of kept steps (an audit's step N and its neighbours) is read,
        not replayed: each pass's counts computed 3-5 of its steps twice."""
        after = step + 1
        head, kept = self._head
        if after == head:
            return kept
        if after < head and after in self.checkpoints:
            params, opt_state = self.checkpoints[after]
            return _widened(params), _widened(opt_state)
        return self._advance(step, state)

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        """The trajectory's lock; the time spent waiting for it (another case of the pass
        walking the same trajectory, on another job's thread) is charged as waiting, not to
        the check that asked (an audit read 1-1.5 s a pass of another case's float64 steps)."""
        with spend("waiting"):
            self._lock.acquire()
        try:
            yield
        finally:
            self._lock.release()

    def _before(self, step: int) -> tuple[int, State]:
        """The nearest state kept at or before ``step``: the head, a checkpoint, the start."""
        head, state = self._head
        if head <= step:
            return head, state
        mark = max((s for s in self.checkpoints if s <= step), default=0)
        if not mark:
            return 0, self.start
        params, opt_state = self.checkpoints[mark]
        return mark, (_widened(params), _widened(opt_state))

    def _advance(self, step: int, state: State) -> State:
        """From ``state`` after ``step`` steps, one more (a shared step: the other
        trajectory's). Past the head the trajectory grows: the step's loss, the new head and,
        every ``every`` steps, a checkpoint."""
        if self.shared is not None and step < self.shared[1]:
            source = self.shared[0]
            loss = source.losses(step + 1)[step]
            params, opt_state = source.state(step + 1)
        else:
            with spend("references"):
                inputs = self.inputs if self.batch_of is None else self.batch_of(step + 1)
                loss, params, opt_state = self.step(self.optimizer, *state, inputs, self.dtype,
                                                    cached=False)
        if step == len(self._losses):
            self._losses.append(loss)
            self._head = (step + 1, (params, opt_state))
            self._checkpoint(step + 1, params, opt_state)
        return params, opt_state

    def _checkpoint(self, step: int, params: Arrays, opt_state: Arrays) -> None:
        if step % self.every:
            return
        kept = (_compact(params, self.dtype), _compact(opt_state, self.dtype))
        self.checkpoints[step] = kept
        self._bytes += _nbytes({step: kept})
        while self._bytes > CHECKPOINT_BYTES:
            self.every *= 2  # memory before replay time: every other checkpoint goes
            self.checkpoints = {s: c for s, c in self.checkpoints.items() if not s % self.every}
            self._bytes = _nbytes(self.checkpoints)


def _compact(tree: Mapping[str, np.ndarray], dtype: Any) -> Arrays:
    """A state rounded to ``dtype``, stored there (exactly); Adam's step count stays float64."""
    return {k: v if k == "count" else np.asarray(v).astype(dtype) for k, v in tree.items()}


def _widened(tree: Mapping[str, np.ndarray]) -> Arrays:
    return {k: np.asarray(v).astype(np.float64) for k, v in tree.items()}


def _nbytes(checkpoints: Mapping[int, State]) -> int:
    return sum(v.nbytes for state in checkpoints.values() for tree in state
               for v in tree.values())
