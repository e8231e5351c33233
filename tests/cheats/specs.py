"""Workloads for the cheating and buggy implementations of tests/sessions/test_cheaters.py.

Each folder beside this file is one way of cheating (or one honest control); its spec.py calls
``lin`` or ``mlp`` here with the implementations it holds. The session copies this folder to a
temporary suites root, so nothing here is ever part of the project's own suites.

``lin`` is least squares with a step size large enough that every step changes the gradient
by a third: a stale gradient, a skipped step or a half batch moves the parameters visibly
differently from the reference. ``mlp`` is the seed MLP (no biases), for the layer APIs and the
data-parallel engines.

``honest(workload, framework)`` is the project's own implementation (suites/<workload>/
impl_<framework>.py) that a cheater loads and overrides only what it cheats with.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from pytest_mlbench import Arrays, Shape, Workload, load_suite_file
from pytest_mlbench.checking.arithmetic import PRECISE_POINTS

SIZES = ("smoke", "default", "paper")
HERE = Path(__file__).resolve().parent
# the project's suites: copied beside the session's suites root as models/ (cheat_session.py),
# or, read in place, the repository's own
SUITES = next(root for root in (HERE.parent / "models", HERE.parents[1] / "suites")
              if root.is_dir())


def suite_file(relative: str) -> ModuleType:
    """A file of the project's suites (``"mlp/spec.py"``), loaded once per path."""
    return load_suite_file(SUITES / relative)


def honest(workload: str, framework: str) -> ModuleType:
    """The honest suites/<workload>/impl_<framework>.py (the module a cheater subclasses or
    wraps, never a copy of it)."""
    return suite_file(f"{workload}/impl_{framework}.py")


def _same_sizes(shape: Shape) -> dict[str, tuple[Shape, ...]]:
    return {size: (shape,) for size in SIZES}


# -- least squares ---------------------------------------------------------------------------

def lin_data(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    x = rng.standard_normal((dims["n"], dims["d"]))
    return {"x": x, "y": x @ rng.standard_normal((dims["d"], 1))
            + 0.1 * rng.standard_normal((dims["n"], 1))}


def lin_params(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    return {"w": 0.1 * rng.standard_normal((dims["d"], 1))}


def lin_loss(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> float:
    r = d["x"] @ p["w"] - d["y"]
    return float(0.5 * np.mean(r * r))


def lin_grad(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> Arrays:
    r = d["x"] @ p["w"] - d["y"]
    return {"w": d["x"].T @ r / len(r)}


def lin(name: str, flops_scale: int = 1, **implementations: tuple[str, ...]) -> Workload:
    """Least squares, 256 x 16, four steps a timed call, lr 0.3."""
    return Workload(
        name=name, summary="least squares for cheaters", data_key="lin",
        sizes=_same_sizes(Shape({"n": 256, "d": 16}, steps_per_call=4)),
        learning_rate=0.3, make_data=lin_data, make_params=lin_params, loss=lin_loss,
        grad=lin_grad, flops_per_step=lambda dims: flops_scale * 4 * dims["n"] * dims["d"],
        implementations=implementations)


# -- the seed MLP ----------------------------------------------------------------------------

IN, HIDDEN = 128, 128


def seed_mlp() -> ModuleType:
    """suites/mlp/spec.py: the seed MLP's data, weights and hand-derived reference."""
    return suite_file("mlp/spec.py")


def mlp_grad(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> Arrays:
    return seed_mlp().grad(p, d)  # type: ignore[no-any-return]


def mlp(name: str, data_parallel: Mapping[str, str] | None = None, steps_per_call: int = 1,
        strategies: tuple[str, ...] = ("dp",), batch: int = 64,
        **implementations: tuple[str, ...]) -> Workload:
    """The seed MLP at batch 64 (or ``batch``: one large enough that a second core pays, for
    the cheaters that take one), one step a timed call (or ``steps_per_call``), lr 1e-2;
    ``data_parallel`` ({framework: variant}) runs the ``strategies`` (the mlp's plan for tp)."""
    return Workload(
        name=name, summary="seed MLP for cheaters", data_key="mlp",
        sizes=_same_sizes(Shape({"batch": batch}, steps_per_call=steps_per_call)),
        learning_rate=1e-2, make_data=seed_mlp().make_data, make_params=seed_mlp().make_params,
        loss=seed_mlp().loss, grad=mlp_grad,
        flops_per_step=lambda dims: 4 * dims["batch"] * IN * HIDDEN,
        parallel={s: dict(data_parallel) for s in strategies} if data_parallel else {},
        tensor_parallel=dict(seed_mlp().SPEC.tensor_parallel), implementations=implementations)


CHECKED = 3  # the checked steps before timing (Workload.check_steps): cheaters switch after


class _Batched:
    """A NumPy trainer's data: the step's batch (Case.batch, read at every step) and the
    learning rate."""

    def __init__(self, case: object) -> None:
        self.batch = case.batch  # type: ignore[attr-defined]
        self.lr = case.learning_rate  # type: ignore[attr-defined]

    @property
    def x(self) -> np.ndarray:
        return self.batch()["x"]

    @property
    def y(self) -> np.ndarray:
        return self.batch()["y"]


class LinNumpy(_Batched):
    """The honest least-squares trainer in NumPy, which the NumPy cheaters start from."""

    def __init__(self, case: object) -> None:
        super().__init__(case)
        self.w = case.params["w"]  # type: ignore[attr-defined]
        self.calls = 0

    def params(self) -> dict[str, np.ndarray]:
        return {"w": self.w}

    def loss_and_grads(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        r = self.x @ self.w - self.y
        return 0.5 * np.mean(r * r), {"w": self.x.T @ r / len(r)}

    def honest_step(self) -> np.ndarray:
        loss, g = self.loss_and_grads()
        self.w = self.w - self.lr * g["w"]
        return loss

    def step(self) -> np.ndarray:
        self.calls += 1
        return self.honest_step() if self.calls <= CHECKED else self.cheat()

    def cheat(self) -> np.ndarray:
        return self.honest_step()


class HalfBatch:
    """An honest StepTrainer which after the checked steps steps through ``half`` (another
    compiled step) on the first half of each step's batch; ``warm`` runs ``half`` once in
    build() so that nothing compiles while timed (None: it compiles at its first timed
    call)."""

    def __init__(self, inner: Any, half: Any, warm: Any = None) -> None:
        self.inner, self.half, self.calls = inner, half, 0
        self.params, self.loss_and_grads = inner.params, inner.loss_and_grads
        if warm is not None:
            warm(half(inner.p, *self.halves()))

    def halves(self) -> tuple[Any, ...]:
        """The first half of the batch of the step being called."""
        data = self.inner.data
        n = data[0].shape[0] // 2
        return tuple(d[:n] for d in data)

    def step(self) -> Any:
        self.calls += 1
        if self.calls <= CHECKED:
            return self.inner.step()
        loss, _, self.inner.p = self.half(self.inner.p, *self.halves())
        return loss


class AfterChecks:
    """An honest trainer whose steps after the checked ones go through ``cheat(inner, n)``
    (``n`` counting them from 1); params and loss_and_grads stay the honest ones."""

    def __init__(self, inner: Any, cheat: Any) -> None:
        self.inner, self.cheat, self.calls = inner, cheat, 0
        self.params, self.loss_and_grads = inner.params, inner.loss_and_grads

    def step(self) -> Any:
        self.calls += 1
        if self.calls <= CHECKED:
            return self.inner.step()
        return self.cheat(self.inner, self.calls - CHECKED)


def doubled_batch(case: Any, concat: Any) -> Any:
    """An AfterChecks cheat: each step's batch repeated twice after the checks (the same mean,
    a new shape), put in place through ``case.feed`` before the honest step reads it,
    ``concat`` the framework's."""

    def cheat(inner: Any, n: int) -> Any:
        case.feed({k: concat([v, v]) for k, v in case.batch().items()})
        return inner.step()

    return cheat


# a data-parallel loss's calls before timing: the gradient at the seeded start on the seeded
# data and on the public batches "too precise" judges (arithmetic.PRECISE_POINTS), the seeded
# data once more, the checked steps
CHECKED_FORWARDS = CHECKED + PRECISE_POINTS + 1


def rank_one_cheats(case: Any, loss: Any, cheat: Any) -> Any:
    """A data-parallel ``loss(p, x, y)`` from a model's ``loss(p, data)``, whose rank 1, once
    the checked forwards are over, first passes ``(p, x, y)`` through ``cheat``."""
    calls = [0]

    def shard_loss(p: dict[str, Any], x: Any, y: Any) -> Any:
        calls[0] += 1
        if case.rank == 1 and calls[0] > CHECKED_FORWARDS:
            p, x, y = cheat(p, x, y)
        return loss(p, {"x": x, "y": y})

    return shard_loss


class MlpNumpy(_Batched):
    """The seed MLP's honest NumPy trainer (suites/mlp), which the broken ones start from:
    ``gradient`` is the hand-written backward pass each of them gets wrong in its own way."""

    def __init__(self, case: object) -> None:
        super().__init__(case)
        self.w1, self.w2 = case.params["w1"], case.params["w2"]  # type: ignore[attr-defined]

    def params(self) -> dict[str, np.ndarray]:
        return {"w1": self.w1, "w2": self.w2}

    def gradient(self, h: np.ndarray, z: np.ndarray) -> dict[str, np.ndarray]:
        dz = (0.5 * (1 + np.tanh(0.5 * z)) - self.y) / z.shape[0]
        dh = (dz @ self.w2.T) * (1 - h * h)
        return {"w1": self.x.T @ dh, "w2": h.T @ dz}

    def loss_and_grads(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        h = np.tanh(self.x @ self.w1)
        z = h @ self.w2
        return np.mean(np.logaddexp(0, z) - self.y * z), self.gradient(h, z)

    def step(self) -> np.ndarray:
        loss, g = self.loss_and_grads()
        self.w1 = self.w1 - self.lr * g["w1"]
        self.w2 = self.w2 - self.lr * g["w2"]
        return loss


# -- implementations that look at the harness (issue 32) --------------------------------------

class Owed:
    """A result whose work is not done yet: converting it (``__array__``, ``.numpy()``,
    ``.detach().cpu()``, any attribute) does the work, wherever that happens."""

    def __init__(self, work: Any) -> None:
        self._work, self._done = work, None

    def _value(self) -> Any:
        if self._done is None:
            self._done = self._work()
        return self._done

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = self._value()
        found = value.numpy() if hasattr(value, "numpy") else value
        return np.asarray(found, dtype=dtype)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._value(), name)


class OwedSteps:
    """Any honest trainer, which after the checked steps defers every third step: step()
    returns an Owed loss, and params() Owed parameters whose conversion runs the steps owed
    (outside the clock, if the harness converts after it)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls, self.owed = inner, 0, 0

    def _settle(self) -> Any:
        while self.owed:
            self.owed -= 1
            self.inner.step()
        return self.inner.params()

    def params(self) -> Any:
        if not self.owed:
            return self.inner.params()
        return {k: Owed(lambda k=k: self._settle()[k]) for k in self.inner.params()}

    def loss_and_grads(self) -> Any:
        self._settle()
        return self.inner.loss_and_grads()

    def step(self) -> Any:
        self.calls += 1
        if self.calls > CHECKED and self.calls % 3 == 0:
            self.owed += 1
            return Owed(lambda: self.inner.loss_and_grads()[0])
        self._settle()
        return self.inner.step()


def round_ahead_is_audited() -> bool | None:
    """What a harness that announced its audits let a step read from its callers' frames:
    whether the round under way keeps its results (the round's number in ``keep``, or the next
    one's, which reads this round's state as its start). None: nothing found to read."""
    frame = sys._getframe(1)
    while frame is not None:
        found = frame.f_locals
        if isinstance(found.get("keep"), dict) and isinstance(found.get("r"), int):
            return found["r"] in found["keep"] or found["r"] + 1 in found["keep"]
        frame = frame.f_back
    return None


class PeekingSteps:
    """Any honest trainer, which after the checked steps reads the harness's frames
    (round_ahead_is_audited) and steps only in rounds it believes are read; when it finds
    nothing to read it assumes the round is not (a harness that announces nothing)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def step(self) -> Any:
        self.calls += 1
        if self.calls <= CHECKED or round_ahead_is_audited():
            return self.inner.step()
        return self.inner.loss_and_grads()[0]  # the loss, and no step


AHEAD_GAP_S = 0.02  # a call this soon after the previous one is taken to be in the same turn


def keys_in_frames() -> tuple[Any, list[int]] | None:
    """The case server serving this call and every probe key its round command holds: what a
    worker learns of the turn's probes."""
    frame = sys._getframe(1)
    while frame is not None:
        found = frame.f_locals
        server, keys = found.get("self"), found.get("keys")
        if hasattr(server, "_probe") and isinstance(keys, list):
            return server, keys
        frame = frame.f_back
    return None


class AheadAnswers:
    """An honest inference implementation whose answers are worked out ahead: the first call
    of a turn (one after a pause of AHEAD_GAP_S or more: the worker was stopped) computes the
    answer to every probe key its round command holds (a command holding the turn's later
    rounds' keys too would let it answer them all), and later calls of the turn are looked up
    by probe; a call whose probe was not worked out
    ahead gets the previous answer (the work was counted as done ahead). The checks before
    timing (no round under way) are answered honestly."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.table: dict[bytes, Any] = {}
        self.last: Any = None
        self.ended = 0.0
        self.looked_up = 0  # calls answered from the table (read by tests)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @staticmethod
    def _id(inputs: Mapping[str, Any]) -> bytes:
        return b"".join(np.asarray(inputs[k]).tobytes() for k in sorted(inputs))

    def forward(self, inputs: Mapping[str, Any]) -> Any:
        import time

        found = keys_in_frames()
        began = time.perf_counter()
        try:
            if found is None:
                return self.inner.forward(inputs)
            if began - self.ended >= AHEAD_GAP_S:  # a turn starts: its whole work, now
                server, keys = found
                self.table = {}
                for key in keys:
                    probe = server._probe(key)
                    self.table[self._id(probe)] = self.inner.forward(
                        {k: server.adapter.asarray(v) for k, v in probe.items()})
            answer = self.table.get(self._id(inputs))
            if answer is None and self.last is None:  # nothing to pass off yet
                self.last = self.inner.forward(inputs)
            elif answer is not None:
                self.looked_up += 1
                self.last = answer
            return self.last
        finally:
            self.ended = time.perf_counter()


AHEAD_STEPS = 64  # steps build() works out ahead (more than a checked session's rounds take)


class AheadSteps:
    """Work done ahead (issue 32, class 3), training: build() runs a second honest trainer
    AHEAD_STEPS steps from the seeded start and keeps every state; after the checked steps a
    timed step is a lookup of the state it should reach (and the loss before it), with no
    work. Honest on data fixed for the whole run; every timed step's batch is drawn from a
    secret sent with its round, so the states worked out ahead are those of other data."""

    def __init__(self, inner: Any, ahead: Any, adapter: Any) -> None:
        self.inner, self.calls = inner, 0
        self.states: list[dict[str, Any]] = []
        self.losses: list[Any] = []
        for _ in range(AHEAD_STEPS):
            self.losses.append(ahead.step())
            self.states.append({k: adapter.asarray(adapter.to_numpy(v))
                                for k, v in ahead.params().items()})

    def params(self) -> Any:
        if self.calls <= CHECKED:
            return self.inner.params()
        return self.states[min(self.calls, AHEAD_STEPS) - 1]

    def loss_and_grads(self) -> Any:
        return self.inner.loss_and_grads()

    def step(self) -> Any:
        self.calls += 1
        if self.calls <= CHECKED:
            return self.inner.step()
        return self.losses[min(self.calls, AHEAD_STEPS) - 1]


# -- the precision the arithmetic ran in (tests/unit/checking/test_arithmetic.py) ----------------------------

def features(xp: object, p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> object:
    """The seed MLP's hidden features scaled by w2: [batch, 128], enough elements to tell
    which precision computed them (the MLP's own output, [batch, 1], is too few)."""
    return xp.tanh(d["x"] @ p["w1"]) * p["w2"].T  # type: ignore[attr-defined]


def features_objective(xp: object, z: np.ndarray, d: Mapping[str, np.ndarray]) -> object:
    return xp.mean(z * z)  # type: ignore[attr-defined]


def mlp_tasks(name: str, **implementations: tuple[str, ...]) -> Workload:
    """The seed MLP's weights and data as a model for inference and vjp (features above)."""
    from pytest_mlbench import infer, transform

    return Workload(
        name=name, summary="seed MLP features for precision cheaters", data_key="mlp",
        sizes=_same_sizes(Shape({"batch": 64})), make_data=seed_mlp().make_data,
        make_params=seed_mlp().make_params,
        tasks=(infer(), transform("vjp")), forward=features, objective=features_objective,
        unsupported={("numpy", "vjp"): "NumPy has no autodiff"} if "numpy" in implementations
        else {},
        implementations=implementations)
