"""The reference trajectory from the seeded start (cached, checkpointed, shared by threads)
and the audit that counts an implementation's steps from there: honest drift passes however
far past the fixed tolerance it grows, parameters a step behind or ahead fail naming the step
they are nearest; the cached trajectory is Reference.train's, bit for bit; the Reference and
the oracle service hold up under concurrent calls. No framework: a least-squares workload with
a hand gradient, and a stand-in for the oracle's worker pool."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import Shape, Workload, adam, momentum, sgd, train
from pytest_mlbench.checking import audit, oracle_client, phases, reference
from pytest_mlbench.checking import trajectory as trajectory_module
from pytest_mlbench.checking.asserts import assert_at_step, assert_close, tolerances
from pytest_mlbench.checking.audit import audit_step_count
from pytest_mlbench.checking.oracle_client import OracleService
from pytest_mlbench.checking.phases import Context, assert_params_displaced
from pytest_mlbench.checking.reference import Reference
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads import data
from pytest_mlbench.workloads.case import CaseId
from pytest_mlbench.workloads.optim import Optimizer

SHAPE = Shape({"n": 128, "d": 8})
WHERE = "numpy eager (lsq-numpy-eager-cpu-fp32) timed round 9 (audited):"
STEP = 32  # the engine's count of step() calls in the audits below


# -- a least-squares workload, its reference and a case's context ----------------------------

def _data(rng: np.random.Generator, dims: Mapping[str, int]) -> dict[str, np.ndarray]:
    x = rng.standard_normal((dims["n"], dims["d"]))
    return {"x": x, "y": x @ rng.standard_normal((dims["d"], 1))}


def _params(rng: np.random.Generator, dims: Mapping[str, int]) -> dict[str, np.ndarray]:
    return {"w": 0.1 * rng.standard_normal((dims["d"], 1)),
            "b": 0.1 * rng.standard_normal((1,))}


def _loss(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> float:
    r = d["x"] @ p["w"] + p["b"] - d["y"]
    return float(0.5 * np.mean(r * r))


def _grad(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    r = d["x"] @ p["w"] + p["b"] - d["y"]
    return {"w": d["x"].T @ r / len(r), "b": np.mean(r, axis=0)}


def workload(optimizer: Optimizer, grad: Callable[..., Any] = _grad) -> Workload:
    return Workload(name="lsq", summary="least squares", sizes={"smoke": (SHAPE,)},
                    make_data=_data, make_params=_params, implementations={"numpy": ("eager",)},
                    tasks=(train(optimizer),), loss=_loss, grad=grad,
                    flops_per_step=lambda dims: 4 * dims["n"] * dims["d"])


def context(optimizer: Optimizer, precision: str = "fp32") -> Context:
    spec = workload(optimizer)
    policy = POLICIES[precision]
    inputs, params = data.seeded_start(spec, SHAPE, 0, policy)
    cid = CaseId(spec, SHAPE, spec.tasks[0], "numpy", "eager", "cpu", precision)
    return Context(cid, Reference(spec, SHAPE, 0, "lsq", OracleService()), policy,
                   tolerances(precision), inputs, params, f"numpy eager ({cid.name})")


def reported(params: Mapping[str, np.ndarray], dtype: Any = np.float32,
             steps: int = STEP) -> dict[str, Any]:
    """What an audited round's snapshot holds: params at the dtype and the engine's count."""
    return {"params": {k: np.asarray(v).astype(dtype) for k, v in params.items()},
            "state": {}, "steps": steps}


def flat(params: Mapping[str, np.ndarray]) -> np.ndarray:
    return np.concatenate([np.ravel(params[k]) for k in sorted(params)])


def unflatten(vector: np.ndarray, like: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    out, at = {}, 0
    for key in sorted(like):
        out[key] = vector[at:at + like[key].size].reshape(like[key].shape)
        at += like[key].size
    return out


def drifted(ctx: Context, fraction: float) -> tuple[dict[str, np.ndarray], float]:
    """The reference's step STEP moved ``fraction`` of the distance to its nearer neighbour,
    in a random direction (rounding drift): the params and that distance."""
    states = ctx.reference.trajectory(ctx.cid.task.optimizer, ctx.params, ctx.inputs,
                                      ctx.dtype).states(STEP - 1, STEP + 1)
    here = flat(states[STEP][0])
    gap = min(float(np.linalg.norm(flat(states[s][0]) - here)) for s in (STEP - 1, STEP + 1))
    direction = np.random.default_rng(7).standard_normal(here.shape)
    moved = here + fraction * gap * direction / np.linalg.norm(direction)
    return unflatten(moved, states[STEP][0]), gap


# -- the nearest-step rule on synthetic trajectories -----------------------------------------

def synthetic(steps: int = 48, size: int = 40) -> dict[int, np.ndarray]:
    """A nearly straight trajectory (a step is 1/32 of the way at step 32, as in training far
    from convergence), bending a little."""
    rng = np.random.default_rng(3)
    start, v, bend = rng.standard_normal(size), rng.standard_normal(size), rng.standard_normal(size)
    return {k: start + k * v + 0.002 * k * k * bend for k in range(steps + 1)}


def across(r: dict[int, np.ndarray], step: int) -> np.ndarray:
    """A unit vector across the trajectory at ``step`` (orthogonal to its direction there)."""
    along = r[step + 1] - r[step - 1]
    sideways = np.zeros_like(r[step])
    sideways[0] = 1.0
    sideways -= sideways @ along * along / np.linalg.norm(along) ** 2
    return sideways / np.linalg.norm(sideways)


def test_honest_drift_passes_where_the_fixed_tolerance_fails() -> None:
    r = synthetic()
    gap = float(np.linalg.norm(r[STEP] - r[STEP - 1]))
    rng = np.random.default_rng(0)
    direction = rng.standard_normal(r[STEP].shape)
    honest = r[STEP] + 0.3 * gap * direction / np.linalg.norm(direction)
    with pytest.raises(AssertionError, match="differs by"):  # rtol 1e-3 of the displacement
        assert_close(honest - r[0], r[STEP] - r[0], rtol=1e-3, atol=1e-4)
    assert_at_step(honest, r, step=STEP)
    assert_at_step(r[STEP], {s: r[s] for s in (STEP - 1, STEP, STEP + 1)}, step=STEP)


@pytest.mark.parametrize("drift", [0.7, 1.5, 3.0])
def test_drift_across_the_trajectory_passes_at_the_step_and_fails_a_step_behind(
        drift: float) -> None:
    """Adam's fp32 drift outgrows half a step late in training (gpt at seed 5: 0.016 from step
    100, whose neighbours are 0.031 away), mostly across the trajectory: at the right step it
    passes however far across; a step behind, as far across, is still nearest the step before."""
    r = synthetic()
    gap = float(np.linalg.norm(r[STEP + 1] - r[STEP]))
    window = {s: r[s] for s in range(STEP - 8, STEP + 9)}
    assert_at_step(r[STEP] + drift * gap * across(r, STEP), window, step=STEP)
    behind = r[STEP - 1] + drift * gap * across(r, STEP - 1)
    with pytest.raises(AssertionError, match=r"nearest the reference's step 31, not 32: 1 "
                                             r"step\(s\) behind"):
        assert_at_step(behind, window, step=STEP)


@pytest.mark.parametrize(("at", "verdict"), [
    (STEP - 1, r"nearest the reference's step 31, not 32: 1 step\(s\) behind"),
    (STEP + 1, r"nearest the reference's step 33, not 32: 1 step\(s\) ahead"),
    (STEP - 3, r"nearest the reference's step 29, not 32: 3 step\(s\) behind"),
])
def test_a_step_behind_or_ahead_fails_naming_the_nearest_step(at: int, verdict: str) -> None:
    r = synthetic()
    window = {s: r[s] for s in range(STEP - 8, STEP + 9)}
    with pytest.raises(AssertionError, match=rf"^x: the parameters are {verdict} \(distance "
                                             rf"[\d.e+-]+ to step {at}, [\d.e+-]+ to step 32; "
                                             r"steps 24 to 40 "
                                             r"searched.*; outside the trajectory tolerance "
                                             r"too: w: differs"):
        assert_at_step(r[at] + 1e-9, window, step=STEP, outside="w: differs", where="x")


def test_parameters_along_the_trajectory_past_half_a_step_fail_and_non_finite_fail() -> None:
    """Drift along the trajectory is what a miscount looks like: past half a step towards
    the next step, the parameters are nearest it."""
    r = synthetic()
    ahead = r[STEP] + 0.6 * (r[STEP + 1] - r[STEP])
    with pytest.raises(AssertionError, match=r"nearest the reference's step 33, not 32"):
        assert_at_step(ahead, r, step=STEP)
    assert_at_step(r[STEP] + 0.4 * (r[STEP + 1] - r[STEP]), r, step=STEP)
    with pytest.raises(AssertionError, match="non-finite parameters"):
        assert_at_step(np.full_like(r[STEP], np.nan), r, step=STEP)


# -- the audit counted from the seeded start ------------------------------------------------

SLOW = [sgd(0.02), momentum(0.005), adam(0.002)]  # far from converged at step 32


@pytest.mark.parametrize("optimizer", SLOW, ids=lambda o: o.name)
def test_the_audit_passes_honest_drift_beyond_the_fixed_tolerance(optimizer: Optimizer) -> None:
    ctx = context(optimizer)
    honest, _ = drifted(ctx, 0.3)
    expected = ctx.reference.trajectory(optimizer, ctx.params, ctx.inputs, ctx.dtype)
    with pytest.raises(AssertionError, match=r"displacement of \w: differs by"):
        assert_params_displaced(ctx, ctx.params, reported(honest)["params"],
                                expected.state(STEP)[0], STEP, where="fixed tolerance")
    audit_step_count(ctx, reported(honest), where=WHERE)


@pytest.mark.parametrize("optimizer", SLOW, ids=lambda o: o.name)
@pytest.mark.parametrize(("at", "verdict"), [
    (STEP - 1, r"31, not 32: 1 step\(s\) behind"), (STEP + 1, r"33, not 32: 1 step\(s\) ahead"),
    (STEP - 2, r"30, not 32: 2 step\(s\) behind")])
def test_the_audit_fails_parameters_off_by_steps_naming_the_nearest(
        optimizer: Optimizer, at: int, verdict: str) -> None:
    ctx = context(optimizer)
    params = ctx.reference.trajectory(optimizer, ctx.params, ctx.inputs, ctx.dtype).state(at)[0]
    with pytest.raises(AssertionError, match=(
            rf"^{re.escape(WHERE)} 32 step\(s\) from the seeded start \(step\(\) has been called 32 "
            r"time\(s\); are the reported parameters behind the work, or is work left running "
            rf"after the round\?\): the parameters are nearest the reference's step {verdict} "
            r"\(distance [\d.e+-]+ to step \d+, [\d.e+-]+ to step 32; .* outside the trajectory "
            r"tolerance too: displacement of \w: differs by")):
        audit_step_count(ctx, reported(params), where=WHERE)


def test_the_audit_passes_parameters_within_the_fixed_tolerance_of_a_converged_step() -> None:
    """Converged, a step moves the parameters by less than float32 resolves: nothing is half
    a step away, and the tolerance alone passes an honest run."""
    ctx = context(sgd(0.5))
    near, gap = drifted(ctx, 0.0)
    wobble = {k: v * (1 + 1e-4) for k, v in near.items()}  # well inside rtol 1e-3
    assert float(np.linalg.norm(flat(wobble) - flat(near))) > 0.5 * gap
    audit_step_count(ctx, reported(wobble), where=WHERE)
    audit_step_count(ctx, reported(near), where=WHERE)


@pytest.mark.parametrize("steps", [STEP, 300])
def test_a_count_within_tolerance_computes_no_reference_step_past_it(steps: int) -> None:
    """Parameters at the reference's step N pass on step N alone: the neighbours the
    nearest-step rule reads are computed only when that rule is needed (each pass's furthest
    count computed step N + 1 for nothing before), past ABSOLUTE_STEPS too."""
    ctx = context(sgd(0.02))
    honest = ctx.reference.trajectory(sgd(0.02), ctx.params, ctx.inputs, ctx.dtype,
                                      secret=5).state(steps)[0]
    fresh = context(sgd(0.02))
    calls = counted(fresh)
    assert audit_step_count(fresh, reported(honest, steps=steps), where=WHERE, secret=5) is None
    assert calls[0] == steps
    behind = ctx.reference.trajectory(sgd(0.02), ctx.params, ctx.inputs, ctx.dtype,
                                      secret=5).state(STEP - 1)[0]
    with pytest.raises(AssertionError, match=rf"nearest the reference's step {STEP - 1}\b"):
        audit_step_count(fresh, reported(behind, steps=STEP), where=WHERE, secret=5)


def test_the_audit_counts_past_absolute_steps_while_the_reference_is_affordable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Parameters left at the start are caught at step 128 and past it (a lag that begins
    after step 128 is no longer free); where the reference's trajectory would cost more than
    COUNT_BUDGET_S, the count is not judged and the reason comes back for the record."""
    ctx = context(sgd(0.02))
    for steps in (128, 129, 300):
        with pytest.raises(AssertionError, match=rf"{steps} step\(s\) from the seeded start"):
            audit_step_count(ctx, reported(ctx.params, steps=steps), where=WHERE)
    monkeypatch.setattr(audit, "COUNT_BUDGET_S", -1.0)
    why = audit_step_count(context(sgd(0.02)), reported(ctx.params, steps=5000), where=WHERE)
    assert why is not None and "step 5000 not counted" in why and "costs more than" in why


# -- where rounding alone moves an honest run half a step: no count can be read -------------

CHAOS_SHAPE = Shape({"n": 1, "d": 8})
CHAOS_LR = 1.8  # gradient descent on (w^2 - 1)^2 / 4 per element: w <- w - lr w (w^2 - 1), chaotic


def _chaos_params(rng: np.random.Generator, dims: Mapping[str, int]) -> dict[str, np.ndarray]:
    return {"w": rng.uniform(0.2, 0.9, (dims["d"], 1))}


def _chaos_loss(p: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray]) -> float:
    return float(np.sum((p["w"] ** 2 - 1) ** 2) / 4)


def chaos_context() -> Context:
    """A loss whose gradient descent is chaotic at CHAOS_LR: a rounding's difference grows
    about 2.5x a step, to the size of the steps by step 20 or so (vit's loss spike at seed 7
    does the same to every fp32 implementation near step 35)."""
    spec = Workload(name="quartic", summary="chaotic descent", sizes={"smoke": (CHAOS_SHAPE,)},
                    make_data=lambda rng, dims: {"x": rng.standard_normal((1, 1))},
                    make_params=_chaos_params, implementations={"numpy": ("eager",)},
                    tasks=(train(sgd(CHAOS_LR)),), loss=_chaos_loss,
                    grad=lambda p, d: {"w": p["w"] * (p["w"] ** 2 - 1)},
                    flops_per_step=lambda dims: 4 * dims["d"])
    policy = POLICIES["fp32"]
    inputs, params = data.seeded_start(spec, CHAOS_SHAPE, 0, policy)
    cid = CaseId(spec, CHAOS_SHAPE, spec.tasks[0], "numpy", "eager", "cpu", "fp32")
    return Context(cid, Reference(spec, CHAOS_SHAPE, 0, "quartic", OracleService()), policy,
                   tolerances("fp32"), inputs, params, f"numpy eager ({cid.name})")


def float32_run(ctx: Context, steps: int) -> dict[str, np.ndarray]:
    """An honest implementation: the same descent, computed in float32."""
    w = np.asarray(ctx.params["w"], np.float32)
    lr = np.float32(CHAOS_LR)
    for _ in range(steps):
        w = w - lr * w * (w * w - np.float32(1))
    return {"w": w}


def test_where_rounding_alone_moves_an_honest_run_a_step_the_count_is_not_judged() -> None:
    ctx = chaos_context()
    n = 32
    honest = float32_run(ctx, n)
    window = ctx.reference.trajectory(sgd(CHAOS_LR), ctx.params, ctx.inputs,
                                      ctx.dtype).states(n - 8, n + 8)
    with pytest.raises(AssertionError, match=r"nearest the reference's step (?!32\b)\d+"):
        assert_at_step(flat(honest).astype(np.float64),
                       {k: flat(v[0]) for k, v in window.items()}, step=n)  # what failed it
    why = audit_step_count(ctx, reported(honest, steps=n), where=WHERE)
    assert why is not None
    assert re.match(r"step 32 not counted from the seeded start: an honest run of the reference "
                    r"rounded differently is [\d.e+-]+ from its step 32 \([\d.e+-]+ steps' "
                    r"length, a step being [\d.e+-]+; nearest step \d+\): rounding alone", why)


def test_where_the_count_can_be_read_a_step_behind_still_fails_in_the_same_descent() -> None:
    """Early in the chaotic descent rounding has not grown yet: the honest float32 run is
    counted (None) and a run a step behind fails as before."""
    ctx = chaos_context()
    n = 6
    assert audit_step_count(ctx, reported(float32_run(ctx, n), steps=n), where=WHERE) is None
    assert audit.count_unreadable(ctx, n, ctx.reference.trajectory(
        sgd(CHAOS_LR), ctx.params, ctx.inputs, ctx.dtype).states(n - 1, n + 1)) is None
    with pytest.raises(AssertionError, match=r"nearest the reference's step 5, not 6"):
        audit_step_count(ctx, reported(float32_run(ctx, n - 1), steps=n), where=WHERE)


def test_a_companion_is_another_rounding_of_the_same_steps_and_replays_alike() -> None:
    """Reference.companion: within DITHER units in the last place of the reference's own
    step, not equal to it, the same on a replay (a hash of the state, not a random stream),
    different for another salt."""
    ctx = context(sgd(0.02))
    ref = ctx.reference.trajectory(sgd(0.02), ctx.params, ctx.inputs, ctx.dtype)
    one = ctx.reference.companion(sgd(0.02), ctx.params, ctx.inputs, ctx.dtype, 0)
    start = data.widen(ctx.params)
    _, stepped, _ = ctx.reference.step(sgd(0.02), start, {}, data.widen(ctx.inputs), np.float64)
    dithered = one.state(1)[0]
    for key, exact in stepped.items():
        ulps = np.abs(dithered[key] - exact) / (np.abs(exact) * np.finfo(np.float32).eps)
        assert ulps.max() <= reference.DITHER + 1
    assert not np.array_equal(flat(dithered), flat(ref.state(1)[0]))
    again = reference._dithered(stepped, np.float32, 0)
    assert all(np.array_equal(again[k], dithered[k]) for k in stepped)
    other = ctx.reference.companion(sgd(0.02), ctx.params, ctx.inputs, ctx.dtype, 1)
    assert not np.array_equal(flat(other.state(1)[0]), flat(dithered))


# -- Adam's step where the working precision cannot resolve the gradient ---------------------

def dead_column_context(optimizer: Optimizer) -> Context:
    """Least squares whose first input column is zero: w[0]'s gradient is exactly zero in
    float64, and an implementation's fp32 may hold any value near it (a dead unit's weight)."""
    def zero_first(rng: np.random.Generator, dims: Mapping[str, int]) -> dict[str, np.ndarray]:
        d = _data(rng, dims)
        d["x"][:, 0] = 0.0
        return d

    ctx = context(optimizer)
    spec = dataclasses.replace(ctx.reference.workload, make_data=zero_first)
    inputs, params = data.seeded_start(spec, SHAPE, 0, ctx.policy)
    return dataclasses.replace(ctx, cid=dataclasses.replace(ctx.cid, workload=spec),
                               reference=Reference(spec, SHAPE, 0, "lsq0", OracleService()),
                               inputs=inputs, params=params)


def first_step(ctx: Context, key: str, index: int, extra: float) -> dict[str, np.ndarray]:
    """The reference's first step, with ``extra`` added to one element's displacement."""
    params = {k: v.copy() for k, v in ctx.reference.trajectory(
        ctx.cid.task.optimizer, ctx.params, ctx.inputs, ctx.dtype).state(1)[0].items()}
    params[key].flat[index] += extra
    return params


def test_adam_may_move_an_unresolved_element_anywhere_within_its_step_bound() -> None:
    """w[0]'s gradient is zero: Adam moves it by lr times the sign of whatever the
    implementation computed there, which the gradient check cannot pin down."""
    ctx = dead_column_context(adam(0.01))
    assert set(phases.unresolved_elements(ctx)) == {"w"}
    for extra in (0.01, -0.01, 0.06):  # a whole step either way, and up to the bound
        assert_params_displaced(ctx, ctx.params, first_step(ctx, "w", 0, extra),
                                first_step(ctx, "w", 0, 0.0), 1, where="first adam step")


def test_adam_fails_an_unresolved_element_past_its_bound_and_a_resolved_one_off_by_a_step(
        ) -> None:
    ctx = dead_column_context(adam(0.01))
    expected = first_step(ctx, "w", 0, 0.0)
    with pytest.raises(AssertionError, match=re.escape(
            "first adam step, displacement of w: element [0, 0], whose gradient is below what "
            "fp32 resolves, moved 0.07 where the reference moved 0: more than twice adam's "
            "step bound over 1 step(s)")):
        assert_params_displaced(ctx, ctx.params, first_step(ctx, "w", 0, 0.07), expected, 1,
                                where="first adam step")
    with pytest.raises(AssertionError, match=r"first adam step, displacement of w: differs by"):
        assert_params_displaced(ctx, ctx.params, first_step(ctx, "w", 1, 0.01), expected, 1,
                                where="first adam step")


@pytest.mark.parametrize("optimizer", [sgd(0.1), momentum(0.05)], ids=lambda o: o.name)
def test_a_step_that_scales_with_the_gradient_leaves_nothing_unresolved(
        optimizer: Optimizer) -> None:
    ctx = dead_column_context(optimizer)
    assert phases.unresolved_elements(ctx) == {}
    with pytest.raises(AssertionError, match=r"displacement of w: differs by"):
        assert_params_displaced(ctx, ctx.params, first_step(ctx, "w", 0, 0.01),
                                first_step(ctx, "w", 0, 0.0), 1, where="first step")


# -- the cached trajectory is Reference.train's ----------------------------------------------

def assert_same_state(found: tuple[Mapping[str, Any], Mapping[str, Any]],
                      expected: tuple[Mapping[str, Any], Mapping[str, Any]], what: str) -> None:
    for tree, other, name in zip(found, expected, ("params", "state"), strict=True):
        assert set(tree) == set(other), f"{what} {name}: {sorted(tree)} != {sorted(other)}"
        for key in tree:
            assert tree[key].dtype == np.float64, f"{what} {name} {key}: {tree[key].dtype}"
            assert np.array_equal(tree[key], other[key]), f"{what} {name} {key} differs"


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("optimizer", [sgd(0.1), momentum(0.05), adam(0.01)],
                         ids=lambda o: o.name)
def test_the_cached_trajectory_is_train_from_the_seeded_start_bit_for_bit(
        optimizer: Optimizer, precision: str) -> None:
    ctx = context(optimizer, precision)
    ref = ctx.reference
    cached = ref.trajectory(optimizer, ctx.params, ctx.inputs, ctx.dtype)
    # out of order: forwards, back to the checkpoints, past the head again
    for steps in (1, 3, 17, 9, 8, 0, 40, 23, 41):
        losses, params, state = ref.train(optimizer, ctx.params, {}, ctx.inputs, steps,
                                          ctx.dtype)
        assert cached.losses(steps) == losses, f"losses of {steps} steps"
        assert_same_state(cached.state(steps), (params, state), f"after {steps} steps")
    assert ref.trajectory(optimizer, ctx.params, ctx.inputs, ctx.dtype) is cached
    other = context(optimizer, "fp64")  # another dtype and start: another trajectory
    assert ref.trajectory(optimizer, other.params, other.inputs, other.dtype) is not cached


@pytest.mark.parametrize("optimizer", [momentum(0.05), adam(0.01)], ids=lambda o: o.name)
def test_each_pass_takes_the_steps_on_the_seeded_data_from_the_public_trajectory(
        optimizer: Optimizer) -> None:
    """A pass's trajectory (its own data secret) begins with the checked steps on the seeded
    data (data.public_steps), which the first pass computed for its checks: three passes
    compute only the steps past them, each its own once, and every state is Reference.train's
    on the pass's batches, bit for bit. (Each pass computed its public steps again before.)"""
    ctx = context(optimizer)
    ref = ctx.reference
    calls = counted(ctx)
    public, steps = data.public_steps(ref.workload), 12
    assert public == 3
    ref.trajectory(optimizer, ctx.params, ctx.inputs, ctx.dtype).losses(public)  # the checks
    assert calls[0] == public
    for secret in (11, 12, 13):
        before = calls[0]
        walked = ref.trajectory(optimizer, ctx.params, ctx.inputs, ctx.dtype, secret)
        states = walked.states(0, steps)
        losses = walked.losses(steps)
        assert_same_state(walked.state(1), states[1], "asked again")  # kept: not computed
        assert calls[0] - before == steps - public, f"secret {secret}"
        keys = [data.step_key(secret, ref.workload, SHAPE, n) for n in range(1, steps + 1)]
        assert keys[:public] == [0] * public and all(keys[public:])
        expected = ref.train(optimizer, ctx.params, {}, ctx.inputs, steps, ctx.dtype, keys)
        assert losses == expected[0]
        assert_same_state(states[steps], expected[1:], f"secret {secret}, {steps} steps")
        for n in range(public + 1):
            assert_same_state(states[n], ref.trajectory(optimizer, ctx.params, ctx.inputs,
                                                        ctx.dtype).state(n), f"step {n}")


def test_checkpoints_replay_the_states_of_a_straight_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replayed from the checkpoints (stored at the dtype) before them, thinned to fit a
    budget, every state is the one a straight run passes through; a query replays fewer steps
    than the checkpoint interval."""
    ctx, optimizer, steps = context(adam(0.01)), adam(0.01), 70
    start = data.widen(ctx.params)
    straight = {0: (start, optimizer.init_state(start))}
    for step in range(steps):  # Reference.train's steps, one by one
        _, params, state = ctx.reference.step(optimizer, *straight[step], ctx.inputs, ctx.dtype)
        straight[step + 1] = (params, state)
    calls = counted(ctx)
    stored = sum(v.nbytes for tree in straight[8]
                 for v in trajectory_module._compact(tree, ctx.dtype).values())
    monkeypatch.setattr(trajectory_module, "CHECKPOINT_BYTES", int(2.5 * stored))  # two fit
    fresh = trajectory_module.Trajectory(ctx.reference.step, optimizer, ctx.params, ctx.inputs,
                                         ctx.dtype, reference.one_blas_thread)
    fresh.losses(steps)
    assert fresh.every == 32 and sorted(fresh.checkpoints) == [32, 64], fresh.checkpoints
    assert all(v.dtype == np.float32 for tree in fresh.checkpoints[32] for k, v in tree.items()
               if k != "count")
    for step in reversed(range(steps + 1)):
        before = calls[0]
        assert_same_state(fresh.state(step), straight[step], f"step {step}")
        assert calls[0] - before < fresh.every


def test_a_window_of_kept_steps_is_read_not_replayed() -> None:
    """Steps the trajectory keeps (every checkpoint and the head) are read back: an audit's
    window of step N and its neighbours, asked after a later count took the head past it,
    computes nothing (it replayed each step after the window's first before)."""
    ctx = context(adam(0.01))
    calls = counted(ctx)
    walked = ctx.reference.trajectory(adam(0.01), ctx.params, ctx.inputs, ctx.dtype)
    walked.state(40)
    assert calls[0] == 40
    window = walked.states(31, 33)
    wide = walked.states(24, 40)
    assert calls[0] == 40
    fresh = context(adam(0.01))
    for n, state in {**window, **wide}.items():
        expected = fresh.reference.train(adam(0.01), fresh.params, {}, fresh.inputs, n,
                                         fresh.dtype)
        assert_same_state(state, expected[1:], f"step {n}")


def test_the_trajectory_leaves_the_value_cache_alone() -> None:
    ctx = context(momentum(0.05))
    ref = ctx.reference
    ref.loss_and_grad(ctx.params, ctx.inputs)
    kept = dict(ref._cache)
    ref.trajectory(momentum(0.05), ctx.params, ctx.inputs, ctx.dtype).states(60, 128)
    assert ref._cache == kept


# -- concurrent calls -----------------------------------------------------------------------

def counted(ctx: Context, pause: float = 0.0) -> list[int]:
    """Count (and slow, by ``pause`` seconds) the reference's gradient evaluations."""
    calls = [0]
    spec = ctx.reference.workload

    def grad(p: Any, d: Any) -> Any:
        calls[0] += 1
        time.sleep(pause)
        return _grad(p, d)

    ctx.reference.workload = dataclasses.replace(spec, grad=grad)
    return calls


def together(*jobs: Callable[[], Any]) -> list[Any]:
    """Run the jobs in threads released at once; their results, or the first error."""
    barrier = threading.Barrier(len(jobs))
    results: list[Any] = [None] * len(jobs)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = jobs[i]()
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    if errors:
        raise errors[0]
    return results


def test_threads_asking_for_the_same_values_share_one_computation() -> None:
    ctx = context(adam(0.01))
    calls = counted(ctx, pause=0.02)
    ref = ctx.reference
    values = together(*[lambda: ref.loss_and_grad(ctx.params, ctx.inputs)] * 4)
    assert calls[0] == 1 and all(v is values[0] for v in values)
    calls[0] = 0
    trajectory = ref.trajectory(adam(0.01), ctx.params, ctx.inputs, ctx.dtype)
    found = together(lambda: trajectory.losses(12), lambda: trajectory.state(12))
    assert calls[0] == 12
    losses, params, state = ref.train(adam(0.01), ctx.params, {}, ctx.inputs, 12, ctx.dtype)
    assert found[0] == losses
    assert_same_state(found[1], (params, state), "12 steps, from two threads")


def test_a_task_is_verified_once_by_threads_asking_together(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = context(sgd(0.1))
    ref, runs = ctx.reference, [0]

    def slow_verify(*args: Any) -> None:
        runs[0] += 1
        time.sleep(0.05)

    monkeypatch.setattr(ref, "_verify", slow_verify)
    together(*[lambda: ref.verify(ctx.cid.task, ctx.inputs, ctx.params, None)] * 3)
    assert runs[0] == 1 and ref.verified == {"sgd"}


def test_blas_stays_limited_while_any_thread_is_inside() -> None:
    """threadpool_limits restores a process-wide setting: entered by two threads and left by
    the first, the second would run unlimited."""
    limited: list[str] = []

    class Limits:
        def __init__(self) -> None:
            limited.append("on")

        def restore_original_limits(self) -> None:
            limited.append("off")

    limit = reference.BlasLimit(Limits)  # its own counter (a campaign may hold the process's)
    first, second = limit(), limit()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert limited == ["on"]
    second.__exit__(None, None, None)
    assert limited == ["on", "off"]


class FakePool:
    """The oracle's worker pool, standing in: a call takes a while, and two at once on one
    pool (interleaved requests on its socket) or a pause during a call are recorded."""

    started: list[FakePool] = []

    def __init__(self, spec: Any, **kwargs: Any) -> None:
        self.busy, self.clashes, self.paused = False, 0, 0
        time.sleep(0.02)  # a start takes a while too: a second caller must wait for it
        FakePool.started.append(self)

    def start(self) -> None:
        time.sleep(0.02)

    @contextlib.contextmanager
    def _in_call(self) -> Iterator[None]:
        self.clashes += self.busy
        self.busy = True
        try:
            time.sleep(0.02)
            yield
        finally:
            self.busy = False

    def call(self, command: str, payload: Any) -> list[Any]:
        with self._in_call():
            return [(command, payload)]

    def pause(self) -> None:
        self.clashes += self.busy
        self.paused += 1

    def close(self) -> None:
        self.clashes += self.busy


def test_oracle_calls_from_threads_neither_interleave_nor_start_two_pools(
        monkeypatch: pytest.MonkeyPatch) -> None:
    FakePool.started = []
    monkeypatch.setattr(oracle_client, "Pool", FakePool)
    service = OracleService()
    jobs = [lambda i=i: service.call("value_and_grad", i, "jax") for i in range(4)]
    answers = together(*jobs, service.pause, lambda: service.call("forward", 9, "torch"))
    assert answers[:4] == [("value_and_grad", i) for i in range(4)]
    assert sorted(service.pools) == ["jax", "torch"] and len(FakePool.started) == 2
    together(lambda: service.call("forward", 1, "jax"), service.close)
    assert sum(p.clashes for p in FakePool.started) == 0
