"""Runs one case: seeded start -> build -> correctness gate -> timing. Correct before fast: the
benchmark fixture is only called once every check has passed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pytest

from pytest_mlbench import catalogue, data, frameworks, timing
from pytest_mlbench.case import Case, CaseId
from pytest_mlbench.checks import (
    TOLERANCES,
    assert_allclose,
    assert_dtypes,
    assert_grad_matches_finite_differences,
    assert_identical,
    assert_same_keys,
    assert_trajectory_close,
    assert_trees_close,
    assert_variant_applied,
)
from pytest_mlbench.errors import Unavailable, Unsupported
from pytest_mlbench.precision import POLICIES, Policy, dtype_name, numpy_dtype
from pytest_mlbench.workload import Arrays, Shape, Workload


class Trainer(Protocol):
    """What ``build(case)`` returns."""

    def params(self) -> Mapping[str, Any]:
        """Current parameters, framework arrays, named as the spec names them."""

    def loss_and_grads(self) -> tuple[Any, Mapping[str, Any]]:
        """Loss and gradients at the current parameters, without updating them."""

    def step(self) -> Any:
        """One SGD step with ``case.learning_rate``; returns the loss before the update."""


@dataclass(frozen=True)
class Env:
    """Session-wide facts a case needs: where suites live, the seed, the adapter registry."""

    root: Path
    seed: int
    registry: Mapping[str, Any]
    results: list[timing.Result]


@contextlib.contextmanager
def skip_unavailable() -> Iterator[None]:
    """A missing framework, absent device or declared-unsupported pair is a skip with a reason."""
    try:
        yield
    except (Unavailable, Unsupported) as exc:
        pytest.skip(str(exc))


def seeded_start(workload: Workload, shape: Shape, seed: int, policy: Policy) -> tuple[Arrays, Arrays]:
    """Data and initial params at the policy's dtype; the same seed gives the same bytes."""
    dtype = numpy_dtype(policy)
    rng = data.generator(seed, workload.data_key or workload.name, shape.label)
    inputs = workload.make_data(rng, shape.dims)
    params = workload.make_params(rng, shape.dims)
    return data.cast(inputs, dtype), data.cast(params, dtype)


def run_case(cid: CaseId, benchmark: Any, env: Env) -> None:
    where = f"{cid.framework} {cid.variant} ({cid.name})"
    policy = POLICIES[cid.precision]
    with skip_unavailable():
        reason = cid.workload.unsupported_reason(cid.framework, cid.variant, cid.device,
                                                 cid.precision)
        if reason:
            raise Unsupported(reason)
        adapter = frameworks.load(cid.framework, dict(env.registry))
        adapter.setup(cid.device, policy, env.seed)
        inputs, params = seeded_start(cid.workload, cid.shape, env.seed, policy)
        case = Case(cid, adapter, policy, {k: adapter.asarray(v) for k, v in inputs.items()},
                    {k: adapter.asarray(v) for k, v in params.items()}, env.seed)
        trainer = catalogue.implementation(env.root, cid.workload, cid.framework).build(case)
    step_times = correctness_gate(case, trainer, inputs, params, where)
    result = timing.measure(benchmark, case, trainer, step_times,
                            digest=data.digest(inputs, params), where=where)
    if result is not None:
        env.results.append(result)


def correctness_gate(case: Case, trainer: Trainer, inputs: Arrays, params: Arrays,
                     where: str) -> list[float]:
    """Same start, correct gradient, reference trajectory, variant applied. Returns the
    wall times of the checked steps (the first includes compilation)."""
    adapter, workload, tol = case.adapter, case.id.workload, TOLERANCES[case.policy.name]
    to_np = adapter.to_numpy
    assert_identical({k: to_np(v) for k, v in trainer.params().items()}, params,
                     where=f"{where} initial params")
    wide_in, wide_p = data.widen(inputs), data.widen(params)
    loss, grads = trainer.loss_and_grads()
    ref_loss = float(workload.loss(wide_p, wide_in))
    assert_allclose(to_np(loss), ref_loss, rtol=tol.grad.rtol, atol=tol.grad.atol * abs(ref_loss),
                    where=f"{where} loss at the start")
    assert_trees_close({k: to_np(v) for k, v in grads.items()}, workload.grad(wide_p, wide_in),
                       rtol=tol.grad.rtol, atol=tol.grad.atol, where=f"{where} gradient of")
    ref_losses, _ = workload.reference_trajectory(params, inputs, workload.check_steps,
                                                  numpy_dtype(case.policy))
    losses, times = [], []
    for step in range(workload.check_steps):
        seconds, out = timing.timed(trainer.step, adapter, trainer)
        losses.append(float(np.asarray(to_np(out), np.float64)))
        times.append(seconds)
        current = {k: to_np(v) for k, v in trainer.params().items()}
        if step == 0:  # the spec guard: learning rate, dtype, biases as declared
            assert_dtypes({k: dtype_name(v) for k, v in current.items()}, case.policy.dtype,
                          where=f"{where} params after the first step")
            assert_moved_like_reference(current, params, inputs, workload, case.policy, 1,
                                        where=f"{where} first SGD step (lr={workload.learning_rate:g})")
    assert_trajectory_close(losses, ref_losses, rtol=tol.trajectory.rtol,
                            atol=tol.trajectory.atol, where=f"{where} trajectory")
    assert_moved_like_reference(current, params, inputs, workload, case.policy,
                                workload.check_steps,
                                where=f"{where} after {workload.check_steps} steps")
    assert_variant_applied(case.traces(), case.variant, where=where)
    return times


def assert_moved_like_reference(current: Mapping[str, np.ndarray], start: Arrays, inputs: Arrays,
                                workload: Workload, policy: Policy, steps: int, *,
                                where: str) -> None:
    """Parameter displacement after ``steps`` SGD steps matches the reference displacement.

    Comparing displacements, not parameters, keeps a wrong learning rate visible: updates
    are far smaller than the weights. Storage rounding adds one unit in the last place per
    step, which the tolerance allows.
    """
    tol = TOLERANCES[policy.name].trajectory
    assert_same_keys(current, start, where=where)
    _, ref = workload.reference_trajectory(start, inputs, steps, numpy_dtype(policy))
    wide_start = data.widen(start)
    moved = {k: data.widen({k: v})[k] - wide_start[k] for k, v in current.items()}
    ref_moved = {k: ref[k] - wide_start[k] for k in ref}
    ulp = float(_eps(policy)) * max(float(np.max(np.abs(v))) for v in wide_start.values())
    for key in sorted(ref_moved):
        scale = float(np.max(np.abs(ref_moved[key])))
        assert_allclose(moved[key], ref_moved[key], rtol=tol.rtol,
                        atol=tol.atol * scale + steps * ulp, where=f"{where}, displacement of {key}")


def _eps(policy: Policy) -> float:
    if policy.dtype == "bfloat16":
        import ml_dtypes

        return float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps)
    return float(np.finfo(policy.dtype).eps)


def check_reference(workload: Workload, shape: Shape, seed: int) -> None:
    """The float64 hand gradient agrees with central finite differences of the loss, or of
    the losses the spec's ``reference_checks`` names when ``grad`` is no loss's gradient."""
    inputs, params = seeded_start(workload, shape, seed, POLICIES["fp64"])
    grad = workload.grad(params, inputs)
    checks = (workload.reference_checks(params, inputs) if workload.reference_checks else
              [("", lambda p: float(workload.loss(p, inputs)), None)])
    rng = data.generator(seed, workload.name, "finite-differences")
    for what, loss, expected in checks:
        assert_grad_matches_finite_differences(
            loss, grad if expected is None else expected, params, rtol=1e-6, atol=1e-9, rng=rng,
            where=f"{workload.name} reference gradient{f' of {what}' if what else ''}")
