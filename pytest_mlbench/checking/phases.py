"""What is checked of one case, in its kind's language, from what its worker reported.

Before timing: the start is the seeded bytes; for a training step, loss and gradient at the
start, the optimizer's hyper-parameters, the first step's displacement and optimizer state, a
short trajectory; for inference and transforms, the first probe's result; of the gradient or
result, and of every audited round's result, the precision its arithmetic ran in
(checking/arithmetic.py: not only the flags and dtypes). While timed:
audited rounds must have done the reference's work (checking/audit.py). After timing: nothing compiled
while timed
(nothing at all for eager), the precision policy and dtypes held, the framework's census of
trainable elements equals the spec's, and a training step's loss and gradient are right where
training has taken the parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_mlbench.checking import arithmetic
from pytest_mlbench.checking.arithmetic import Statistic
from pytest_mlbench.checking.asserts import (
    _fmt_index,
    assert_census,
    assert_close,
    assert_dtypes,
    assert_eager,
    assert_identical,
    assert_loss_scaled,
    assert_no_retrace,
    assert_same_keys,
    assert_sharded,
    assert_trajectory_close,
    assert_trees_close,
    assert_variant_applied,
    excess,
)
from pytest_mlbench.checking.reference import Reference
from pytest_mlbench.checking.trajectory import State, Trajectory
from pytest_mlbench.engine.protocol import Finished, Gradient, Started, Stepped
from pytest_mlbench.parallel import holders
from pytest_mlbench.precision import Policy, dtype_name, numpy_dtype
from pytest_mlbench.workloads import data
from pytest_mlbench.workloads.case import CaseId
from pytest_mlbench.workloads.optim import check_hyperparameters
from pytest_mlbench.workloads.spec import Arrays, Tolerance, Tolerances

Snapshot = Mapping[str, Arrays]  # {"params": ..., "state": ...}
UNRESOLVED = 4.0  # x the per-element gradient resolution: Adam's step direction is rounding


@dataclass
class Context:
    cid: CaseId
    reference: Reference
    policy: Policy
    tol: Tolerances
    inputs: Arrays  # the seeded data at the policy's dtype
    params: Arrays  # the seeded params at the policy's dtype
    where: str
    # unresolved_elements' masks, found once a case (every audit asks)
    unresolved: dict[str, np.ndarray] | None = field(default=None, init=False, repr=False)
    # the precision the arithmetic ran in, judged from results (checking/arithmetic.py), by result;
    # the harness's own honest computation's statistic, found once a case
    arithmetic: dict[str, dict[str, Any]] = field(default_factory=dict, init=False, repr=False)
    honest: dict[str, Statistic | None] = field(default_factory=dict, init=False, repr=False)
    # the seeded start's results beside float32 at its most precise (arithmetic.ideal_result):
    # what "too precise" judges, over several points (check_precise)
    precise: list[tuple[Statistic, Statistic]] = field(default_factory=list, init=False,
                                                       repr=False)

    @property
    def dtype(self) -> Any:
        return numpy_dtype(self.policy)

    @property
    def size(self) -> int:
        return sum(int(v.size) for v in self.params.values())

    def eps(self) -> float:
        if self.policy.dtype == "bfloat16":
            import ml_dtypes

            return float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps)
        return float(np.finfo(self.policy.dtype).eps)


# -- before timing --------------------------------------------------------------------------------

def check_start(ctx: Context, start: Started) -> None:
    """Same bytes for every framework; the optimizer's own settings; the census."""
    if start.digest != data.digest(ctx.inputs, ctx.params):
        raise AssertionError(f"{ctx.where}: the worker built its case from other data "
                             f"(digest {start.digest} != {data.digest(ctx.inputs, ctx.params)})")
    assert_dtypes({k: dtype_name(v) for k, v in start.snapshot["params"].items()},
                  ctx.policy.dtype, where=f"{ctx.where} params at the start",
                  why=storage_rule(ctx))
    assert_identical(start.snapshot["params"], ctx.params,
                     where=f"{ctx.where} initial params (the seeded start, the same bytes for "
                           "every framework)")
    optimizer = ctx.cid.task.optimizer
    if optimizer is not None:
        expected = optimizer.init_state(ctx.params)
        assert_same_keys(start.snapshot["state"], expected,
                         where=f"{ctx.where} {optimizer.name} state (state() names)")
        for key, value in start.snapshot["state"].items():
            if np.any(np.asarray(value, np.float64) != 0):
                raise AssertionError(f"{ctx.where} {optimizer.name} state {key}: does not start "
                                     "at zero")
        if start.hyperparameters is not None:
            check_hyperparameters(start.hyperparameters, optimizer, where=ctx.where)
        elif optimizer.slots:
            raise AssertionError(f"{ctx.where}: the {optimizer.name} optimizer's "
                                 "hyper-parameters are not reported; add hyperparameters() "
                                 "reading them back from the framework's optimizer")
    check_census(ctx, start.census, "at the start")


def check_census(ctx: Context, census: Any, when: str) -> None:
    if census is not None:
        found, what = census
        assert_census(found, ctx.size, what=what, where=f"{ctx.where} {when}")


def check_gradient(ctx: Context, found: Gradient, key: int = 0) -> None:
    """Loss and gradient at the seeded start against the float64 reference, on the seeded
    data (``key`` 0) or on public batch ``key`` (data.batch: more points of the start for
    "too precise", check_precise)."""
    inputs = data.batch(ctx.cid.workload, ctx.cid.shape, ctx.inputs, key)
    loss, grads = ctx.reference.loss_and_grad(ctx.params, inputs)
    tol = ctx.tol.grad
    batch = f" on batch {key}" if key else ""
    what = f"gradient at the start{batch}"

    def norm_wise() -> None:
        assert_close(found.loss, loss, rtol=tol.rtol, atol=tol.atol,
                     where=f"{ctx.where} loss at the start{batch}")
        assert_trees_close(found.grads, grads, rtol=tol.rtol, atol=tol.atol,
                           where=f"{ctx.where} gradient{batch} of")

    check_arithmetic(ctx, found.grads, grads, what, None, norm_wise, inputs=inputs)


def check_arithmetic(ctx: Context, found: Any, expected: Any, what: str, probe: Arrays | None,
                     norm_wise: Callable[[], None], where: str = "",
                     inputs: Arrays | None = None) -> None:
    """The norm-wise check, then the precision the arithmetic ran in (checking/arithmetic.py); a
    norm-wise failure whose error is the size of a lower precision's rounding says so. Kept
    for the record once a case and result (``where`` is given by audited rounds: not kept);
    at the seeded start (no ``where``) a point for "too precise" too (check_precise)."""
    label = f"{where or ctx.where} {what}"
    try:
        norm_wise()
    except AssertionError as exc:
        hint = arithmetic.lower_precision_hint(found, expected, policy=ctx.policy.name)
        if hint is None:
            raise
        raise AssertionError(f"{exc}\n{label}: {hint}") from None
    honest = honest_statistic(ctx, expected, probe) if inputs is None or inputs is ctx.inputs \
        else None
    judged = arithmetic.assert_arithmetic_precision(
        found, expected, policy=ctx.policy.name, where=label, honest=honest)
    if not where:
        ctx.arithmetic.setdefault(what, judged)
        add_precise_point(ctx, found, expected, probe, ctx.inputs if inputs is None else inputs,
                          judged)


def honest_statistic(ctx: Context, expected: Any,
                     probe: Arrays | None) -> Statistic | None:
    """What the harness's own float32 computation says of a float32 case's checked result
    (once a case; None where the spec has no NumPy function for it, or the case is not
    float32: only "too exact" asks)."""
    if "result" not in ctx.honest:
        float32 = arithmetic.JUDGED.get(ctx.policy.name) == "float32"
        result = arithmetic.honest_result(ctx.cid.workload, ctx.cid.task, ctx.params,
                                          ctx.inputs, probe) if float32 else None
        ctx.honest["result"] = None if result is None else arithmetic.measure(
            result, expected, "float32")
    return ctx.honest["result"]


def add_precise_point(ctx: Context, found: Any, expected: Any, probe: Arrays | None,
                      inputs: Arrays, judged: Mapping[str, Any]) -> None:
    """A result of the seeded start beside float32 at its most precise
    (arithmetic.ideal_result), for check_precise: float32 cases whose spec has the NumPy
    function, where the result was judged and "too exact" is informative."""
    if (arithmetic.JUDGED.get(ctx.policy.name) != "float32" or not judged.get("judged")
            or "too exact not judged" in judged.get("why", "")):
        return
    ideal = arithmetic.ideal_result(ctx.cid.workload, ctx.cid.task, ctx.params, inputs, probe)
    if ideal is not None:
        ctx.precise.append((arithmetic.measure(found, expected, "float32"),
                            arithmetic.measure(ideal, expected, "float32")))


def check_precise(ctx: Context, what: str) -> None:
    """"Too precise" over the seeded start's points (arithmetic.assert_not_more_precise),
    kept for the record under ``what``."""
    judged = arithmetic.assert_not_more_precise(ctx.precise, "float32",
                                                where=f"{ctx.where} {what}")
    if judged.get("judged") and what in ctx.arithmetic:
        ctx.arithmetic[what] = {**ctx.arithmetic[what], "precise": judged}


def check_steps(ctx: Context, first: Stepped, rest: Stepped | None) -> None:
    """The first optimizer step moves the parameters (and state) as the reference's; the
    losses of the checked steps follow the reference trajectory."""
    opt = ctx.cid.task.optimizer
    assert opt is not None
    steps = ctx.cid.workload.check_steps
    trajectory = seeded_trajectory(ctx)
    assert_dtypes(first.dtypes, ctx.policy.dtype, where=f"{ctx.where} params after the "
                                                          "first step", why=storage_rule(ctx))
    label = f"first {opt.name} step ({opt.describe()})"
    assert_displaced_like(ctx, ctx.params, first.snapshot, trajectory.state(1), 1,
                          where=f"{ctx.where} {label}")
    losses = list(first.losses) + list(rest.losses if rest else [])
    tol = ctx.tol.trajectory
    assert_trajectory_close(losses, trajectory.losses(len(losses)), rtol=tol.rtol,
                            atol=tol.atol, where=f"{ctx.where} trajectory")
    if rest is not None:
        assert_displaced_like(ctx, ctx.params, rest.snapshot, trajectory.state(steps), steps,
                              where=f"{ctx.where} after {steps} steps")


def seeded_trajectory(ctx: Context, secret: int | None = None) -> Trajectory:
    """The reference's steps from the case's seeded start (cached by the Reference), each
    timed step on its batch of the pass with data secret ``secret`` (data.step_key)."""
    opt = ctx.cid.task.optimizer
    assert opt is not None
    return ctx.reference.trajectory(opt, ctx.params, ctx.inputs, ctx.dtype, secret)


def assert_moved_like_reference(ctx: Context, before: Snapshot, after: Snapshot, steps: int, *,
                                where: str, batches: Sequence[int] | None = None) -> None:
    """The displacement of every parameter over ``steps`` steps from ``before`` matches the
    reference's from the same point (each step on its batch of ``batches``, the keys the
    round's steps were sent), and so does the optimizer state."""
    opt = ctx.cid.task.optimizer
    assert opt is not None
    _, ref_params, ref_state = ctx.reference.train(opt, before["params"], before["state"],
                                                   ctx.inputs, steps, ctx.dtype, batches)
    assert_displaced_like(ctx, before["params"], after, (ref_params, ref_state), steps,
                          where=where)


def assert_displaced_like(ctx: Context, start: Arrays, after: Snapshot, expected: State,
                          steps: int, *, where: str) -> None:
    """``after`` (params and state, ``steps`` steps from ``start``) against the reference's
    ``expected`` params and state there: the displacement of every parameter, and the
    optimizer state."""
    assert_params_displaced(ctx, start, after["params"], expected[0], steps, where=where)
    opt = ctx.cid.task.optimizer
    assert opt is not None
    if opt.slots:
        assert_state_like(ctx, after["state"], expected[1], steps, where=where)


def assert_params_displaced(ctx: Context, start: Arrays, found: Arrays, expected: Arrays,
                            steps: int, *, where: str) -> None:
    """Each parameter's displacement from ``start`` against the reference's, per tensor.

    Displacements, not values: updates are far smaller than the weights, so comparing values
    would hide a wrong learning rate (or a step that did nothing). Storage at the dtype adds up
    to half a unit in the last place per element and step, which the tolerance allows."""
    tol = ctx.tol.trajectory
    assert_same_keys(found, start, where=f"{where}, parameters")
    for key in sorted(start):
        label = f"{where}, displacement of {key}" if where else f"displacement of {key}"
        moved, expected_move, rounding = _displacement(ctx, key, start, found, expected, steps,
                                                       where=label)
        try:
            assert_close(moved, expected_move, rtol=tol.rtol, atol=tol.atol, rounding=rounding,
                         where=label)
        except AssertionError as exc:
            raise AssertionError(f"{exc}{_held_by(ctx, key, moved, expected_move)}") from None


def _held_by(ctx: Context, key: str, found: Any, expected: Any) -> str:
    """A sharded case: which worker's shard holds the worst element (parallel.holders)."""
    cid = ctx.cid
    error = np.abs(np.asarray(found, np.float64) - np.asarray(expected, np.float64))
    if not cid.strategy or error.ndim == 0 or not np.all(np.isfinite(error)):
        return ""
    worst = tuple(int(i) for i in np.unravel_index(np.argmax(error), error.shape))
    who = holders(cid.layout, cid.framework, error.shape, worst,
                  cid.workload.split_axis(key))
    return f"; that element is in {who}" if who else ""


def displacement_excess(ctx: Context, start: Arrays, found: Arrays, expected: Arrays,
                        steps: int, tol: Tolerance | None = None) -> dict[str, float]:
    """What assert_params_displaced measures, per tensor, as a fraction of what ``tol`` (the
    trajectory tolerance unless given) allows: 1.0 is the limit; inf where an element whose
    gradient the precision cannot resolve moved past the optimizer's bound
    (tools/tolerance_sweep.py)."""
    tol = tol or ctx.tol.trajectory
    out = {}
    for key in sorted(start):
        try:
            moved, expected_move, rounding = _displacement(ctx, key, start, found, expected,
                                                           steps, where=key)
        except AssertionError:
            out[key] = math.inf
            continue
        out[key] = excess(moved, expected_move, rtol=tol.rtol, atol=tol.atol,
                          rounding=rounding)
    return out


def _displacement(ctx: Context, key: str, start: Arrays, found: Arrays, expected: Arrays,
                  steps: int, *, where: str) -> tuple[np.ndarray, np.ndarray, float]:
    """(the tensor's move from ``start``, the reference's, what storage at the dtype rounds
    over ``steps`` steps); elements whose gradient the precision cannot resolve are held to
    the optimizer's bound here (AssertionError past it) and compared no further."""
    begin = data.widen({key: start[key]})[key]
    moved = data.widen({key: found[key]})[key] - begin
    expected_move = np.asarray(expected[key], np.float64) - begin
    unresolved = unresolved_elements(ctx)
    if key in unresolved:
        moved = assert_bounded_where_unresolved(ctx, moved, expected_move, unresolved[key],
                                                steps, where=where)
    return moved, expected_move, steps * ctx.eps() * float(np.linalg.norm(begin))


def unresolved_elements(ctx: Context) -> dict[str, np.ndarray]:
    """Where a per-element normalised step (Adam) is not determined by the working precision:
    the elements whose float64 gradient, at the seeded start or at a reference state of the
    checked steps after it, lies within UNRESOLVED times what the gradient check resolves per
    element (its norm-wise allowance spread over the tensor, (rtol + atol) ||g|| / sqrt(n)).

    Adam moves each element by about lr whatever its gradient's size, so such an element's
    direction is rounding. A dead unit's weights are the usual ones (tanh-GELU's 1 + tanh(z)
    cancels in fp32 far below zero: gpt's h0.fc2_w[144, 23], gradient 3e-11, no correct
    digit). Those moves then change the parameters the next step starts from, by about 2 lr
    in a few elements, which tips other near-zero gradients: gpt's h1.proj_w[76, 77] at seed
    6, twice the per-element resolution at the start and the step after, came out 0.27 lr
    off after 3 steps although fp32's error there was a tenth of that resolution. Hence the
    factor, and the states of the checked steps as well as the start's (the trajectory and
    its gradients are cached). Masks by tensor, only tensors that have such elements; none for
    optimizers whose step scales with the gradient."""
    if ctx.unresolved is not None:
        return ctx.unresolved
    opt = ctx.cid.task.optimizer
    if opt is None or opt.step_bound is None:
        ctx.unresolved = {}
        return ctx.unresolved
    trajectory = seeded_trajectory(ctx)
    tol = ctx.tol.grad
    out: dict[str, np.ndarray] = {}
    for step in range(max(ctx.cid.workload.check_steps, 1)):
        params = ctx.params if step == 0 else trajectory.state(step)[0]
        _, grads = ctx.reference.loss_and_grad(params, ctx.inputs)
        for key, g in grads.items():
            g = np.asarray(g, np.float64)
            resolved = (tol.rtol + tol.atol) * float(np.linalg.norm(g)) / math.sqrt(
                max(g.size, 1))
            mask = np.abs(g) < UNRESOLVED * resolved
            if mask.any():
                out[key] = out[key] | mask if key in out else mask
    ctx.unresolved = out
    return out


def assert_bounded_where_unresolved(ctx: Context, moved: np.ndarray, expected: np.ndarray,
                                    mask: np.ndarray, steps: int, *, where: str) -> np.ndarray:
    """The unresolved elements (``mask``) moved within what the optimizer's step bound allows
    either side of the reference's move over ``steps`` steps; returns ``moved`` with them set
    to the reference's, for the norm-wise check of the rest."""
    opt = ctx.cid.task.optimizer
    assert opt is not None and opt.step_bound is not None
    bound = 2 * opt.step_bound * steps + steps * ctx.eps() * float(np.max(np.abs(moved)))
    off = np.where(mask, np.abs(moved - expected), 0.0)
    worst = np.unravel_index(int(np.argmax(off)), np.shape(off))
    if off[worst] > bound:
        index = _fmt_index(tuple(int(i) for i in worst))
        raise AssertionError(
            f"{where}: element {index}, whose gradient is below what {ctx.policy.name} "
            f"resolves, moved {moved[worst]:.6g} where the reference moved "
            f"{expected[worst]:.6g}: more than twice {opt.name}'s step bound over {steps} "
            f"step(s) ({bound:.3g}) apart")
    return np.where(mask, expected, moved)


def assert_state_like(ctx: Context, found: Arrays, expected: Arrays, steps: int, *,
                      where: str) -> None:
    """The optimizer state against the reference's: the step count exactly, each slot within
    the trajectory tolerance (plus what storage at the dtype rounds over ``steps`` steps)."""
    opt = ctx.cid.task.optimizer
    assert opt is not None
    tol = ctx.tol.trajectory
    assert_same_keys(found, expected, where=f"{where}, {opt.name} state")
    for key in sorted(expected):
        if key == "count":
            if float(found[key]) != float(expected[key]):
                raise AssertionError(f"{where}: {opt.name} step count is "
                                     f"{float(found[key]):g}, the reference's "
                                     f"{float(expected[key]):g}")
            continue
        assert_close(found[key], expected[key], rtol=tol.rtol, atol=tol.atol,
                     rounding=_slot_rounding(ctx, expected[key], steps),
                     where=f"{where}, {opt.name} state {key}")


def state_excess(ctx: Context, found: Arrays, expected: Arrays, steps: int,
                 tol: Tolerance | None = None) -> dict[str, float]:
    """What assert_state_like measures of each slot (the step count aside), as a fraction of
    what ``tol`` (the trajectory tolerance unless given) allows (tools/tolerance_sweep.py)."""
    tol = tol or ctx.tol.trajectory
    return {key: excess(found[key], value, rtol=tol.rtol, atol=tol.atol,
                        rounding=_slot_rounding(ctx, value, steps))
            for key, value in sorted(expected.items()) if key != "count"}


def _slot_rounding(ctx: Context, expected: Any, steps: int) -> float:
    """What storage at the dtype rounds of an optimizer slot over ``steps`` steps."""
    return steps * ctx.eps() * float(np.linalg.norm(expected))


def check_output(ctx: Context, found: Any, index: int, what: str, where: str = "") -> None:
    """An inference or transform result for probe ``index`` against the reference."""
    cid = ctx.cid
    probe = probe_of(ctx, index)
    expected = ctx.reference.expected(cid.task, ctx.params, ctx.inputs, probe)
    tol = ctx.tol.grad
    label = f"{where or ctx.where} {cid.task.describe()} {what}"

    def norm_wise() -> None:
        if isinstance(expected, Mapping):
            assert_trees_close(found, expected, rtol=tol.rtol, atol=tol.atol, where=label)
        else:
            assert_close(found, expected, rtol=tol.rtol, atol=tol.atol, where=label)

    check_arithmetic(ctx, found, expected, f"{cid.task.describe()} {what}", probe, norm_wise,
                     where)


def probe_of(ctx: Context, index: int) -> Arrays:
    cid = ctx.cid
    outputs = None
    if cid.task.transform == "vjp" and cid.workload.forward is not None:
        out = cid.workload.forward(np, data.widen(ctx.params), data.widen(ctx.inputs))
        outputs = tuple(np.shape(out))
    return data.probe(cid.workload, cid.shape, cid.task, ctx.reference.seed, index, ctx.policy,
                      data.widen(ctx.params), outputs)


# -- after timing ------------------------------------------------------------------------------------

def storage_rule(ctx: Context) -> str:
    """What a mixed-precision policy keeps at its storage dtype, for a dtype failure."""
    policy = ctx.policy
    if not policy.mixed:
        return ""
    return (f"the {policy.name} policy keeps master weights and optimizer state at "
            f"{policy.dtype} and computes at {policy.compute}")


def check_finish(ctx: Context, finish: Finished) -> None:
    cid = ctx.cid
    compiles = finish.compiles
    assert_variant_applied(finish.traces, cid.variant, where=ctx.where)
    assert_eager(compiles, cid.variant, where=ctx.where)
    if finish.policy:  # before the compilations: a changed setting makes JAX compile again
        raise AssertionError(f"{ctx.where}: precision policy {ctx.policy.name} no longer holds "
                             f"after timing: {finish.policy}")
    # every compilation counts while timed, the framework's own too (eager dispatch compiling
    # a primitive for a new value each step)
    assert_no_retrace(finish.backend_compiles.get("timing", 0), 0, where=ctx.where)
    if cid.task.kind == "train":
        assert_dtypes(finish.dtypes, ctx.policy.dtype, where=f"{ctx.where} params after "
                                                             "timing", why=storage_rule(ctx))
        assert_loss_scaled(finish.loss_scale, ctx.policy, where=f"{ctx.where} after timing")
        if finish.trained is not None:  # the first pass only (measuring/case_run.py: ``full``)
            check_trained(ctx, finish)
    check_census(ctx, finish.census, "after timing")
    if cid.strategy:
        check_sharding(ctx, finish.resident)


def check_sharding(ctx: Context, resident: dict[str, list[int]] | None) -> None:
    """Every worker of a parallel case holds no more of the parameters, their gradients and
    the optimizer state than its strategy leaves it: fsdp a shard of each, tp and dpxtp the
    plan's split; a strategy claimed but not carried out (state kept whole) fails."""
    cid = ctx.cid
    if resident is None:
        raise AssertionError(f"{ctx.where}: the {cid.strategy} case reported nothing about "
                             "what its workers hold")
    slots = len(cid.task.optimizer.slots) if cid.task.optimizer else 0
    shapes = {k: tuple(v.shape) for k, v in ctx.params.items()}
    assert_sharded(resident, shapes, ctx.dtype.itemsize, slots, cid.layout,
                   cid.workload.split_axis, where=ctx.where)


def check_trained(ctx: Context, finish: Finished) -> None:
    """Loss and gradient where training has taken the parameters. The tolerance's absolute
    part scales with the start's loss and gradient, so a run near convergence (a loss or
    gradients near zero, which the working precision resolves only to its rounding of the
    start's magnitudes) passes; a hidden parameter or a precision change made after the
    checks does not, nor a gradient correctly rounded from float64 (checking/arithmetic.py).
    Too coarse and too precise are not judged here: where training took the parameters depends
    on the run's secret batches, and near convergence cancellation moves every computation's
    error alike (honest torch came in under the most precise float32 there: docs/MEASURING.md),
    so either would give the same code different verdicts from run to run."""
    assert finish.snapshot is not None and finish.trained is not None
    params = finish.snapshot["params"]
    loss, grads = ctx.reference.loss_and_grad(params, ctx.inputs)
    start_loss, start = ctx.reference.loss_and_grad(ctx.params, ctx.inputs)
    tol = ctx.tol.grad
    found = finish.trained
    assert_close(found.loss, loss, rtol=tol.rtol, atol=tol.atol, scale=abs(start_loss),
                 where=f"{ctx.where} loss where training took the parameters")
    scales = {k: float(np.linalg.norm(v)) for k, v in start.items()}
    assert_trees_close(found.grads, grads, rtol=tol.rtol, atol=tol.atol, scales=scales,
                       where=f"{ctx.where} gradient where training took the parameters, of")
    what = "gradient where training took the parameters"
    ctx.arithmetic[what] = arithmetic.assert_arithmetic_precision(
        found.grads, grads, policy=ctx.policy.name, where=f"{ctx.where} {what}",
        honest=honest_at(ctx, params, grads), coarse=False)


def honest_at(ctx: Context, params: Arrays, expected: Any) -> Statistic | None:
    """The harness's own float32 computation's statistic at ``params`` (where training took
    them: near convergence a gradient cancels, and its error grows for every computation
    alike), None where there is none (checking/arithmetic.honest_result)."""
    if arithmetic.JUDGED.get(ctx.policy.name) != "float32":
        return None
    result = arithmetic.honest_result(ctx.cid.workload, ctx.cid.task, params, ctx.inputs, None)
    return None if result is None else arithmetic.measure(result, expected, "float32")
