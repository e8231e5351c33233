"""Workloads and implementations for tests/sessions/test_kinds.py: the seed MLP as one workload per
broken (or honest) implementation, every kind of task, through the builders; each broken one
gets one thing wrong in its own kind's terms.

``mlp(name, tasks, **implementations)`` is the seed MLP at batch 16 with a hand-written
gradient (training) and its array-API forward (inference and transforms, through the oracle).
Its JAX model and NumPy gradient are the project's own (suites/mlp), loaded
through ``suite_file``, never copied."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from pytest_mlbench import Arrays, Optimizer, Shape, Task, Workload, load_suite_file, train

HERE = Path(__file__).resolve().parent
# the project's suites: copied beside the session's suites root as models/ (test_kinds.py),
# or, read in place, the repository's own
SUITES = next(root for root in (HERE.parent / "models", HERE.parents[1] / "suites")
              if root.is_dir())

IN, HIDDEN = 128, 128


def data(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    return {"x": rng.standard_normal((dims["batch"], IN)),
            "y": rng.integers(0, 2, size=(dims["batch"], 1)).astype(np.float64)}


def params(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    return {"w1": 0.1 * rng.standard_normal((IN, HIDDEN)),
            "w2": 0.1 * rng.standard_normal((HIDDEN, 1))}


def forward(xp: Any, p: Mapping[str, Any], d: Mapping[str, Any]) -> Any:
    return xp.tanh(d["x"] @ p["w1"]) @ p["w2"]


def objective(xp: Any, z: Any, d: Mapping[str, Any]) -> Any:
    return xp.mean(xp.logaddexp(xp.zeros_like(z), z) - d["y"] * z)


def loss(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> float:
    return float(objective(np, forward(np, p, d), d))


def grad(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> Arrays:
    """The seed MLP's hand-derived gradient (suites/mlp/spec.py)."""
    return suite_file("mlp/spec.py").grad(p, d)  # type: ignore[no-any-return]


def mlp(name: str, tasks: tuple[Task, ...], unsupported: Mapping[tuple[str, ...], str] | None = None,
        **implementations: tuple[str, ...]) -> Workload:
    shape = Shape({"batch": 16})
    return Workload(
        name=name, summary="seed MLP for the kinds' tests", data_key="kinds",
        sizes={size: (shape,) for size in ("smoke", "default", "paper")}, tasks=tasks,
        make_data=data, make_params=params, loss=loss, grad=grad, forward=forward,
        objective=objective, flops_per_step=lambda dims: 4 * dims["batch"] * IN * HIDDEN,
        unsupported=dict(unsupported or {}), implementations=implementations)


def unit_case(workload: Workload, framework: str, adapter: Any, variant: str, policy: Any,
              scaled: Mapping[str, float] | None = None) -> Any:
    """``workload``'s seeded start at the smoke size as a Case of its first task, for a unit
    test that builds an implementation in this process: ``adapter`` set up on the CPU at
    ``policy``; ``scaled``: factors for named inputs or parameters (a gradient made to
    overflow or underflow)."""
    from pytest_mlbench.workloads import data as seeded
    from pytest_mlbench.workloads.case import Case, CaseId

    shape, task = workload.sizes["smoke"][0], workload.all_tasks[0]
    inputs, params = seeded.seeded_start(workload, shape, 0, policy)
    for name, factor in (scaled or {}).items():
        held = inputs if name in inputs else params
        held[name] = held[name] * np.asarray(factor, held[name].dtype)
    adapter.setup("cpu", policy, 0)
    cid = CaseId(workload, shape, task, framework, variant, "cpu", policy.name)
    return Case(cid, adapter, policy, {k: adapter.asarray(v) for k, v in inputs.items()},
                {k: adapter.asarray(v) for k, v in params.items()}, 0)


# -- the model in each framework ------------------------------------------------------------

def suite_file(relative: str) -> ModuleType:
    """A file of the project's suites (``"mlp/spec.py"``), loaded once per path."""
    return load_suite_file(SUITES / relative)


def jax_model() -> tuple[Any, Any]:
    """The seed MLP's forward and loss in jax.numpy (suites/mlp/impl_jax.py)."""
    honest = suite_file("mlp/impl_jax.py")
    return honest.forward, honest.loss


def numpy_value_and_grad(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> Any:
    """The hand-written gradient at the policy dtype (suites/mlp/impl_numpy.py)."""
    return suite_file("mlp/impl_numpy.py").value_and_grad(p, d)


def with_optimizer(case: Any, optimizer: Optimizer) -> Any:
    """``case`` as if its task named ``optimizer``: how a broken implementation ends up
    running another optimizer than the spec's."""
    task = train(optimizer)
    return dataclasses.replace(case, id=dataclasses.replace(case.id, task=task))


class Wrapped:
    """An implementation around another, every method passed through unless overridden."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


# a result whose conversion does the work (tests/cheats/specs.py's, copied beside the session's
# suites root as cheats/specs.py by test_kinds.py, or read in place)
Owed = load_suite_file(HERE.parent / "cheats" / "specs.py").Owed


class OwedCalls(Wrapped):
    """Every third forward() or apply() after the first returns an Owed result."""

    calls = 0

    def _maybe_owed(self, method: str, probe: Any) -> Any:
        self.calls += 1
        call = getattr(self.inner, method)
        if self.calls > 1 and self.calls % 3 == 0:
            return Owed(lambda: call(probe))
        return call(probe)

    def forward(self, inputs: Any) -> Any:
        return self._maybe_owed("forward", inputs)

    def apply(self, probe: Any) -> Any:
        return self._maybe_owed("apply", probe)
