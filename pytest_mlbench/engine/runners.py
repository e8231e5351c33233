"""What one timed call is, per kind of task, around the object an implementation's build(case)
returned. Runs in the worker. The timed region of every round is the same for every kind:

    start clock; for each call: its batch or probe selected (prepare), the call;
    read what the round produced (references); check each is the framework's own concrete
    array on the case's device (``check_concrete``); adapter.sync(all of it); stop clock

and then, after the clock, every result made a host NumPy copy (``materialise``), digested
and kept for the audit. The clock stops when the framework says the work is done: a
synchronised array of the framework's exact type (no subclass, wrapper, tracer or lazy
tensor) holds its values, and copying it to the host runs no code of the implementation's;
what that copy costs is the transfer's, not the step's (on a GPU, many times the step:
docs/MEASURING.md). An object of any other type fails the case before it is converted or
synchronised. Whatever a round needs (each step's batch, each call's probe) is made inside
its clock, so no part of a round's work can be done in its preparation; the harness's work
after the clock is timed on the same clock and bounded by the parent
(audit.assert_rounds_fit). The clock is this module's, read once per round; the parent
times every turn with its own clock too (measuring/case_run.py), so a replaced clock shows.

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


# the process's CPU time over all its threads, bound as this module loads (before any
# implementation): the harness's work after a round's clock is measured with it
process_time = time.process_time
PYTHON_NUMBERS = (float, int)  # a loss as a Python number (loss.item()) is concrete too


def assert_concrete(adapter: Any, value: Any, what: str,
                    accepted: tuple[type, ...] | None) -> None:
    """``value`` is one of the framework's own concrete arrays (``adapter.concrete_types()``,
    by exact type; an adapter without that method accepts anything) on the case's device
    (``adapter.on_device``, where the adapter has it). Checked inside the clock, before the
    sync and before any conversion: an object of another type could do owed work when
    synchronised or converted, after the clock."""
    if accepted is None:
        return
    if type(value) not in accepted:
        names = ", ".join(sorted(_type_name(t) for t in accepted))
        raise NotConcrete(
            f"{what} is a {_type_name(type(value))}, not one of {adapter.name}'s own "
            f"concrete arrays ({names}): work owed, not done (a result converted after "
            "the clock could do the round's work untimed); return the framework's arrays")
    where = getattr(adapter, "on_device", None)
    if where is not None and not isinstance(value, PYTHON_NUMBERS) and not where(value):
        raise NotConcrete(f"{what} is not on the case's device ({_device_of(value)}): a "
                          "result elsewhere (a lazy or meta tensor, another device) is not "
                          "the finished work of the step; return the case device's arrays")


def _device_of(value: Any) -> str:
    found = getattr(value, "device", None)
    return str(found() if callable(found) else found)


def concrete(adapter: Any, value: Any, what: str, accepted: tuple[type, ...] | None) -> np.ndarray:
    """``value`` as a NumPy copy made by the adapter, once it is one of the framework's own
    concrete arrays (``assert_concrete``)."""
    assert_concrete(adapter, value, what, accepted)
    return adapter.to_numpy(value)


def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def assert_concrete_tree(adapter: Any, tree: Any, what: str,
                         accepted: tuple[type, ...] | None) -> None:
    if isinstance(tree, Mapping):
        for k, v in tree.items():
            assert_concrete(adapter, v, f"{what} {k!r}", accepted)
    else:
        assert_concrete(adapter, tree, what, accepted)


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
        self.readers: dict[Any, Any] = {}  # the adapter's to_numpy_tree keeps its readers here

    def accepted(self) -> tuple[type, ...] | None:
        """The adapter's concrete array types, asked once (after build: Keras is loaded)."""
        if self._accepted is False:
            self._accepted = concrete_types(self.adapter)
        return self._accepted  # type: ignore[return-value]

    def to_np(self, tree: Mapping[str, Any]) -> Arrays:
        return tree_to_numpy(self.adapter, tree, self.readers)

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
        return _to_np(self, self.call(probe))


class TransformRunner(Runner):
    def call(self, probe: Any) -> Any:
        return self.impl.apply(probe)

    def evaluate(self, probe: Any) -> Any:
        return _to_np(self, self.call(probe))


def read(runner: Runner, outs: list[Any]) -> tuple[list[Any], Any]:
    """A round's results as references, inside its clock: every call's output and the tail
    (training: parameters and optimizer state), each checked to be the framework's own
    concrete array on the case's device (``assert_concrete``), nothing converted."""
    adapter, accepted = runner.adapter, runner.accepted()
    for i, out in enumerate(outs):
        assert_concrete_tree(adapter, out, f"the result of timed call {i + 1}", accepted)
    tail = runner.tail()
    if tail is not None:
        params, state = tail
        tail = (dict(params), dict(state) if state else {})
        assert_concrete_tree(adapter, tail[0], "params()", accepted)
        assert_concrete_tree(adapter, tail[1], "state()", accepted)
    return outs, tail


def materialise(runner: Runner, outs: list[Any], tail: Any) -> tuple[list[Any], Any]:
    """A round's results (as ``read`` checked them) as NumPy copies, after its clock: every
    call's output (training: the loss step() returned) and the tail (training: parameters
    and optimizer state)."""
    found = [_to_np(runner, out) for out in outs]
    if tail is None:
        return found, None
    params, state = tail
    return found, (_to_np(runner, params), _to_np(runner, state) if state else {})


RUNNERS = {"train": TrainRunner, "infer": InferRunner, "transform": TransformRunner}


def _to_np(runner: Runner, out: Any) -> Any:
    if isinstance(out, Mapping):
        return runner.to_np(out)
    return runner.adapter.to_numpy(out)


def tree_to_numpy(adapter: Any, tree: Mapping[str, Any], readers: dict[Any, Any]) -> Arrays:
    """A mapping's values as NumPy copies: the adapter's ``to_numpy_tree`` where it has one
    (a framework whose arrays are cheaper read together; ``readers``, what it keeps for the
    next read, is the case's runner's), else each by ``to_numpy``."""
    together = getattr(adapter, "to_numpy_tree", None)
    if together is not None:
        return together(tree, readers)
    return {k: adapter.to_numpy(v) for k, v in tree.items()}


def as_given(key: Any) -> Any:
    """A round's inputs as they were given (steps(): None, the data as they are)."""
    return key


def timed_round(runner: Runner, keys: Sequence[Any], guard: Callable[[], Any],
                prepare: Callable[[Any], Any] = as_given) -> tuple[float, list[Any], Any]:
    """One timed round: for each key its batch or probe made (``prepare``) and the call, the
    round's reads checked, one sync; the seconds, and the outputs and tail as references
    (``materialise`` copies them after the clock)."""
    with guard():
        start = time.perf_counter()
        outs = [runner.call(prepare(k)) for k in keys]
        outs, tail = read(runner, outs)
        runner.adapter.sync((outs, tail))
        seconds = time.perf_counter() - start
    return seconds, outs, tail


def bare_loop(runner: Runner, keys: Sequence[Any], prepare: Callable[[Any], Any]) -> float:
    """The same built step in a plain loop, fed the same way, with one sync at its end and
    nothing of the harness's between its calls: seconds a call. Informative (the harness's
    overhead is the figure over this), never audited."""
    start = time.perf_counter()
    outs = [runner.call(prepare(k)) for k in keys]
    runner.adapter.sync((outs, runner.tail()))
    return (time.perf_counter() - start) / max(len(keys), 1)
