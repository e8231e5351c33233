"""What one timed call is, per kind of task, around the object an implementation's build(case)
returned. Runs in the worker. The timed region of every round is the same for every kind:

    start clock; k calls; read what the round produced; adapter.sync(all of it); stop clock

so the work of every call must be finished before the clock stops, and whatever the round's
result is read from (parameters and optimizer state, or the calls' outputs) was obtained
inside the timed region. The checks then read those objects after the clock has stopped.

The implementation protocols (ADDING_WORKLOADS.md has complete examples):

    train:      params() -> {name: array}; loss_and_grads() -> (loss, {name: grad});
                step() -> loss before the update; state() -> {slot.name: array} (optimizers
                with state: momentum, adam, adamw); hyperparameters() -> {lr, ...} (the
                framework optimizer's own values, read back)
    infer:      params(); forward(inputs: {name: array}) -> outputs
    transform:  params(); apply(probe: {name: array}) -> result (an array, or a {name: array}
                for parameter-shaped results: vjp, hvp)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

Arrays = dict[str, np.ndarray]
PROTOCOLS = {
    "train": ("params", "loss_and_grads", "step"),
    "infer": ("params", "forward"),
    "transform": ("params", "apply"),
}


class ProtocolError(TypeError):
    """build(case) returned something that does not follow the task's protocol."""


def check_protocol(obj: Any, kind: str, where: str) -> None:
    if obj is None:
        raise ProtocolError(f"{where}: build(case) returned None; it must return an object "
                            f"with {', '.join(m + '()' for m in PROTOCOLS[kind])} for a {kind} "
                            "task (ADDING_WORKLOADS.md)")
    missing = [m for m in PROTOCOLS[kind] if not callable(getattr(obj, m, None))]
    if missing:
        raise ProtocolError(f"{where}: build(case) returned a {type(obj).__name__} without "
                            f"{', '.join(m + '()' for m in missing)}, which a {kind} task needs")


class Runner:
    """One built implementation and its kind's calls."""

    def __init__(self, impl: Any, adapter: Any, stateful: bool) -> None:
        self.impl, self.adapter, self.stateful = impl, adapter, stateful
        self.calls = 0  # timed-unit calls so far (training: optimizer steps), counted here

    def to_np(self, tree: Mapping[str, Any]) -> Arrays:
        return {k: self.adapter.to_numpy(v) for k, v in tree.items()}

    def params(self) -> Arrays:
        return self.to_np(self.impl.params())

    def state(self) -> Arrays:
        if not self.stateful:
            return {}
        found = getattr(self.impl, "state", None)
        if not callable(found):
            raise ProtocolError("a training step with a stateful optimizer must report its "
                                "state: add state() -> {'m.<param>': ..., 'count': ...}")
        return self.to_np(found())

    def snapshot(self, tail: Any = None) -> dict[str, Arrays]:
        """Parameters and optimizer state as NumPy copies; from ``tail`` (the objects a timed
        round read) when given, so what is checked is what the clock waited for."""
        if tail is None:
            return {"params": self.params(), "state": self.state()}
        params, state = tail
        return {"params": self.to_np(params), "state": self.to_np(state) if state else {}}

    # the timed unit of each kind
    def call(self, probe: Any) -> Any:
        raise NotImplementedError

    def tail(self) -> Any:
        return None

    def evaluate(self, probe: Any) -> Any:
        raise NotImplementedError


class TrainRunner(Runner):
    def call(self, probe: Any) -> Any:
        self.calls += 1
        return self.impl.step()

    def tail(self) -> Any:
        state = self.impl.state() if self.stateful else None
        return self.impl.params(), state

    def evaluate(self, probe: Any) -> dict[str, Any]:
        loss, grads = self.impl.loss_and_grads()
        return {"loss": np.asarray(self.adapter.to_numpy(loss), np.float64),
                "grads": self.to_np(grads)}

    def hyperparameters(self) -> dict[str, float] | None:
        found = getattr(self.impl, "hyperparameters", None)
        return {k: float(v) for k, v in found().items()} if callable(found) else None


class InferRunner(Runner):
    def call(self, probe: Any) -> Any:
        return self.impl.forward(probe)

    def evaluate(self, probe: Any) -> Any:
        return _to_np(self.adapter, self.call(probe))


class TransformRunner(Runner):
    def call(self, probe: Any) -> Any:
        return self.impl.apply(probe)

    def evaluate(self, probe: Any) -> Any:
        return _to_np(self.adapter, self.call(probe))


RUNNERS = {"train": TrainRunner, "infer": InferRunner, "transform": TransformRunner}


def _to_np(adapter: Any, out: Any) -> Any:
    if isinstance(out, Mapping):
        return {k: adapter.to_numpy(v) for k, v in out.items()}
    return adapter.to_numpy(out)


def timed_round(runner: Runner, probes: Sequence[Any], guard: Callable[[], Any]) -> tuple[
        float, list[Any], Any]:
    """One timed round: every call, the round's reads, one sync; seconds, outputs, tail."""
    with guard():
        start = time.perf_counter()
        outs = [runner.call(p) for p in probes]
        tail = runner.tail()
        runner.adapter.sync((outs, tail))
        seconds = time.perf_counter() - start
    return seconds, outs, tail
