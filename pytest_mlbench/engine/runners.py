"""What one timed call is, per kind of task, around the object an implementation's build(case)
returned. Runs in the worker. The timed region of every round is the same for every kind:

    start clock; k calls; read what the round produced; adapter.sync(all of it);
    every result made host NumPy by the adapter; stop clock

so the work of every call must be finished before the clock stops: whatever the round's
results are (parameters and optimizer state, or the calls' outputs) leave the clock as NumPy
copies the harness made, after checking that each is the framework's own concrete array type
(``concrete``). An object of any other type (a duck type whose ``__array__`` or ``.numpy()``
would do owed work when converted) fails the case: nothing of a round is converted after
its clock has stopped. The clock is this module's, read once per round; the parent times
every turn with its own clock too (measuring/case_run.py), so a replaced clock shows.

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


class NotConcrete(AssertionError):
    """A timed call returned something that is not the framework's own concrete array."""


def concrete_types(adapter: Any) -> tuple[type, ...] | None:
    """The framework's own concrete array types, or None for an adapter that names none."""
    types = getattr(adapter, "concrete_types", None)
    return (*PYTHON_NUMBERS, *types()) if callable(types) else None


PYTHON_NUMBERS = (float, int)  # a loss as a Python number (loss.item()) is concrete too


def concrete(adapter: Any, value: Any, what: str, accepted: tuple[type, ...] | None) -> np.ndarray:
    """``value`` as a NumPy copy, made by the adapter, once its type is one of the
    framework's own concrete arrays (``adapter.concrete_types()``; an adapter without that
    method converts whatever it gets). Any other object is refused before it is converted: a
    conversion that runs the implementation's code could do work the clock never saw."""
    if accepted is not None and type(value) not in accepted:
        names = ", ".join(sorted(_type_name(t) for t in accepted))
        raise NotConcrete(
            f"{what} is a {_type_name(type(value))}, not one of {adapter.name}'s own "
            f"concrete arrays ({names}): work owed, not done (a result converted after "
            "the clock could do the round's work untimed); return the framework's arrays")
    return adapter.to_numpy(value)


def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def concrete_tree(adapter: Any, tree: Any, what: str,
                  accepted: tuple[type, ...] | None) -> Any:
    """A result (an array, or a {name: array}) as NumPy copies, each checked (``concrete``)."""
    if isinstance(tree, Mapping):
        return {k: concrete(adapter, v, f"{what} {k!r}", accepted) for k, v in tree.items()}
    return concrete(adapter, tree, what, accepted)


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
        self.feed: Callable[[Any], None] = lambda batch: None  # training: Case.feed
        self._accepted: tuple[type, ...] | None | bool = False  # not asked yet

    def accepted(self) -> tuple[type, ...] | None:
        """The adapter's concrete array types, asked once (after build: Keras is loaded)."""
        if self._accepted is False:
            self._accepted = concrete_types(self.adapter)
        return self._accepted  # type: ignore[return-value]

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
        params, state = tail  # already NumPy (timed_round)
        return {"params": dict(params), "state": dict(state) if state else {}}

    # the timed unit of each kind
    def call(self, probe: Any) -> Any:
        raise NotImplementedError

    def tail(self) -> Any:
        return None

    def evaluate(self, probe: Any) -> Any:
        raise NotImplementedError


class TrainRunner(Runner):
    def call(self, probe: Any) -> Any:
        """One step on the batch ``probe`` (put in place as the step is called, inside the
        clock, as a data loader feeds a step; None: the data stay as they are)."""
        self.calls += 1
        if probe is not None:
            self.feed(probe)
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

    def loss_scale(self) -> float | None:
        """The trainer's dynamic loss scale now (``loss_scale()``; a loss-scaling policy's),
        None where it has none."""
        found = getattr(self.impl, "loss_scale", None)
        scale = found() if callable(found) else None
        return None if scale is None else float(np.asarray(self.adapter.to_numpy(scale)))


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


def materialise(runner: Runner, outs: list[Any], tail: Any) -> tuple[list[Any], Any]:
    """A round's results as NumPy, inside the clock: every call's output (training: the loss
    step() returned) and the tail (training: parameters and optimizer state)."""
    adapter, accepted = runner.adapter, runner.accepted()
    found = [concrete_tree(adapter, out, f"the result of timed call {i + 1}", accepted)
             for i, out in enumerate(outs)]
    if tail is None:
        return found, None
    params, state = tail
    return found, (concrete_tree(adapter, dict(params), "params()", accepted),
                   concrete_tree(adapter, dict(state), "state()", accepted) if state else {})


RUNNERS = {"train": TrainRunner, "infer": InferRunner, "transform": TransformRunner}


def _to_np(adapter: Any, out: Any) -> Any:
    if isinstance(out, Mapping):
        return {k: adapter.to_numpy(v) for k, v in out.items()}
    return adapter.to_numpy(out)


def timed_round(runner: Runner, probes: Sequence[Any], guard: Callable[[], Any]) -> tuple[
        float, list[Any], Any]:
    """One timed round: every call, the round's reads, one sync, every result made NumPy;
    seconds, the outputs and the tail, all NumPy."""
    with guard():
        start = time.perf_counter()
        outs = [runner.call(p) for p in probes]
        tail = runner.tail()
        runner.adapter.sync((outs, tail))
        outs, tail = materialise(runner, outs, tail)
        seconds = time.perf_counter() - start
    return seconds, outs, tail
