"""Correctness checks, all named assert_*, all (actual, expected, *, rtol, atol, ...).

Messages say what differed, where, by how much and against which tolerance, so a failing case
reads like a bug report. Tolerances by precision live in TOLERANCES (a workload may override
them in its spec) and nowhere else.

The tolerance model is norm-wise per tensor: ``||actual - expected|| <= rtol * ||expected|| +
atol * scale``, where ``scale`` is the expected tensor's own norm unless the check says
otherwise (after training, the start gradient's). A realistic model at fp32 or bf16 has a few
elements far off in relative terms (a ReLU pre-activation rounding to the other side of zero,
a max-pool tie), which an element-wise test fails depending on the seed; the norm of the
error does not care which elements they are, but counts them: a model with kinks needs a
tolerance that holds a few such terms (tools/tolerance_sweep.py measures one). Messages still
name the worst element.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pytest_mlbench import variants
from pytest_mlbench.checking.arithmetic import UNIT
from pytest_mlbench.parallel import Layout
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads.data import widen
from pytest_mlbench.workloads.spec import Tolerance, Tolerances

# the mixed-precision policies, whose tolerances tolerances() scales by depth
MIXED = tuple(name for name, policy in POLICIES.items() if policy.mixed)
# a mixed-precision case's norm-wise error, in units of the compute dtype's roundoff a layer:
# (one evaluation, after a few steps); measured over every honest implementation
# (docs/MEASURING.md), with room for a seed's kinks
MIXED_UNITS = (6.0, 12.0)


def _mixed(compute: str) -> Tolerances:
    """A mixed-precision policy's tolerances for one layer of rounded arithmetic: the compute
    dtype's unit roundoff times MIXED_UNITS (``tolerances`` scales them by the square root of
    the model's depth)."""
    start, steps = (units * UNIT[compute] for units in MIXED_UNITS)
    return Tolerances(Tolerance(start, start), Tolerance(steps, steps))


TOLERANCES: dict[str, Tolerances] = {
    "fp64": Tolerances(Tolerance(1e-7, 1e-9), Tolerance(1e-6, 1e-8)),
    "fp32": Tolerances(Tolerance(1e-4, 1e-5), Tolerance(1e-3, 1e-4)),
    "tf32": Tolerances(Tolerance(1e-2, 1e-2), Tolerance(3e-2, 3e-2)),
    "bf16": Tolerances(Tolerance(6e-2, 6e-2), Tolerance(1.5e-1, 1.5e-1)),
    # every mixed policy (amp: bfloat16 compute, amp16: float16) by the same rule
    **{name: _mixed(policy.compute) for name, policy in POLICIES.items() if policy.mixed},
}


def tolerances(precision: str, overrides: Mapping[str, Tolerances] | None = None,
               depth: int = 1) -> Tolerances:
    """The precision's tolerances, or the workload's override for it. A mixed-precision
    policy's grow with the square root of ``depth``, the layers of rounded arithmetic from
    the inputs to the loss (the workload's ``depth``): each rounds its inputs to the compute dtype,
    a relative error of about u, and independent errors add in quadrature. There an override
    widens the rule (for what the rule does not model: a max-pool's ties, a bfloat16
    reduction) and never narrows it: a deeper shape of the same workload (suites/vit's gpu
    size, 12 blocks) keeps the rule's growth."""
    found = (overrides or {}).get(precision)
    if found is not None and precision not in MIXED:
        return found
    base = TOLERANCES[precision]
    k = math.sqrt(max(depth, 1))
    rule = Tolerances(*(Tolerance(t.rtol * k, t.atol * k) for t in (base.grad, base.trajectory)))
    if precision not in MIXED:
        return base
    if found is None:
        return rule
    wider = Tolerances(*(Tolerance(max(a.rtol, b.rtol), max(a.atol, b.atol))
                         for a, b in ((found.grad, rule.grad),
                                      (found.trajectory, rule.trajectory))))
    return found if wider == found else wider


def _fmt_index(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]" if index else "(scalar)"


def _wide(value: Any) -> np.ndarray:
    return np.asarray(widen({"x": np.asarray(value)})["x"], dtype=np.float64)


def _measure(a: np.ndarray, e: np.ndarray, rtol: float, atol: float, scale: float | None,
             rounding: float) -> tuple[float, float, float]:
    """(||a - e||, what the norm-wise tolerance allows, ||e||)."""
    norm_e = float(np.linalg.norm(e))
    allowed = rtol * norm_e + atol * (norm_e if scale is None else scale) + rounding
    return float(np.linalg.norm(a - e)), allowed, norm_e


def excess(actual: Any, expected: Any, *, rtol: float, atol: float,
           scale: float | None = None, rounding: float = 0.0) -> float:
    """How far ``actual`` is from ``expected`` as a fraction of what assert_close allows
    (1.0: at the limit, above it fails; inf when not finite). Shapes must agree."""
    a, e = _wide(actual), np.asarray(expected, np.float64)
    if not np.all(np.isfinite(a)):
        return float("inf")
    err, allowed, _ = _measure(a, e, rtol, atol, scale, rounding)
    return err / allowed if allowed > 0 else (0.0 if err == 0 else float("inf"))


def assert_close(actual: Any, expected: Any, *, rtol: float, atol: float,
                 scale: float | None = None, rounding: float = 0.0, where: str = "") -> None:
    """Norm-wise: ||actual - expected|| <= rtol ||expected|| + atol * scale + rounding, shapes
    equal, all finite. ``scale`` defaults to ||expected||; ``rounding`` is what storage at a
    narrow dtype may add (a unit in the last place per step)."""
    a, e = _wide(actual), np.asarray(expected, np.float64)
    prefix = f"{where}: " if where else ""
    if a.shape != e.shape:
        raise AssertionError(f"{prefix}shape {a.shape} != expected {e.shape}")
    if not np.all(np.isfinite(a)):
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
        raise AssertionError(f"{prefix}non-finite value {a[bad]} at {_fmt_index(bad)}")
    err, allowed, norm_e = _measure(a, e, rtol, atol, scale, rounding)
    if err > allowed:
        worst = tuple(int(i) for i in np.unravel_index(np.argmax(np.abs(a - e)), a.shape))
        rel = err / norm_e if norm_e else float("inf")
        raise AssertionError(
            f"{prefix}differs by {err:.3g} in norm ({rel:.3g} of ||expected|| {norm_e:.3g}), "
            f"allowed {allowed:.3g} (rtol {rtol:.3g}, atol {atol:.3g}"
            f"{'' if scale is None else f' x scale {scale:.3g}'}"
            f"{f' + rounding {rounding:.3g}' if rounding else ''}); worst element at "
            f"{_fmt_index(worst)}: actual {a[worst]:.6g}, expected {e[worst]:.6g}")


def assert_trees_close(actual: Mapping[str, Any], expected: Mapping[str, Any], *, rtol: float,
                       atol: float, scales: Mapping[str, float] | None = None,
                       where: str = "") -> None:
    """assert_close per named array (a tensor's error is judged against its own norm)."""
    assert_same_keys(actual, expected, where=where)
    for key in sorted(expected):
        scale = None if scales is None else scales[key]
        assert_close(actual[key], expected[key], rtol=rtol, atol=atol, scale=scale,
                     where=f"{where} {key}")


def assert_same_keys(actual: Mapping[str, Any], expected: Mapping[str, Any], *,
                     where: str = "") -> None:
    if set(actual) != set(expected):
        extra, missing = sorted(set(actual) - set(expected)), sorted(set(expected) - set(actual))
        raise AssertionError(f"{where}: names differ from the spec: extra {extra}, "
                             f"missing {missing}")


def assert_identical(actual: Mapping[str, Any], expected: Mapping[str, np.ndarray], *,
                     where: str = "") -> None:
    """Bit-for-bit equality of named arrays: every implementation starts from the same bytes."""
    assert_same_keys(actual, expected, where=where)
    for key in sorted(expected):
        a, e = np.asarray(actual[key]), np.asarray(expected[key])
        if a.dtype != e.dtype or a.shape != e.shape:
            raise AssertionError(f"{where} {key}: {a.dtype}{list(a.shape)} where "
                                 f"{e.dtype}{list(e.shape)} was expected")
        if a.tobytes() != e.tobytes():
            diff = np.abs(widen({"a": a})["a"] - widen({"e": e})["e"])
            raise AssertionError(f"{where} {key}: not the same bytes: {int(np.sum(diff > 0))} of "
                                 f"{a.size} elements differ, the largest by {float(diff.max()):.3g}")


def assert_loss_scaled(scale: float | None, policy: Any, *, where: str) -> None:
    """Training under a loss-scaling policy (amp16) kept a dynamic loss scale: one the
    trainer reports, finite, at least 1, and a power of two (it starts at the policy's
    power of two and only ever doubles or halves: precision.Policy)."""
    if not policy.loss_scale:
        return
    if scale is None:
        raise AssertionError(
            f"{where}: the {policy.name} policy trains with a dynamic loss scale, and this "
            "trainer reports none: give it a loss_scale() method returning its current scale "
            "(the builders' trainers have one: torch.amp.GradScaler, Keras's "
            "LossScaleOptimizer, the JAX trainer's own)")
    if not (math.isfinite(scale) and scale >= 1.0 and math.log2(scale).is_integer()):
        raise AssertionError(
            f"{where}: the loss scale after timing is {scale!r}: a dynamic loss scale that "
            f"starts at {policy.loss_scale:g} and doubles or halves stays a power of two of "
            "at least 1")


def assert_dtypes(actual: Mapping[str, str], expected: str, *, where: str = "",
                  why: str = "") -> None:
    """Every named array (parameters, optimizer slots) has the policy's storage dtype (no
    silent float64 or float32 drift; a mixed-precision case's master weights and optimizer
    state kept at the storage dtype, ``why`` saying so)."""
    wrong = {k: v for k, v in sorted(actual.items()) if v != expected}
    if wrong:
        raise AssertionError(f"{where}: dtype is not the policy's {expected}: {wrong}"
                             + (f"; {why}" if why else ""))


def assert_grad_matches_finite_differences(
    loss: Callable[[Any], float],
    grad: Mapping[str, np.ndarray],
    params: Mapping[str, np.ndarray],
    *,
    rtol: float,
    atol: float,
    rng: np.random.Generator,
    directions: int = 4,
    where: str = "",
) -> None:
    """Directional derivatives of ``loss`` by central differences (float64) against <grad, v>.

    The step is relative to the parameters' scale, and several steps are tried from large to
    small: a direction whose larger steps cross a kink of a non-smooth function (a ReLU
    pre-activation, a max-pool tie) still agrees at a step that crosses none, so the verdict
    does not depend on the seed."""
    size = np.sqrt(sum(float(np.sum(np.square(p))) for p in params.values()))
    count = sum(p.size for p in params.values())
    unit = size / np.sqrt(max(count, 1)) or 1.0
    for i in range(directions):
        v = {k: rng.standard_normal(p.shape) for k, p in params.items()}
        analytic = sum(float(np.vdot(grad[k], v[k])) for k in params)
        tried = []
        for rel in (1e-4, 1e-5, 1e-6, 1e-7):
            eps = rel * unit
            plus = loss({k: p + eps * v[k] for k, p in params.items()})
            minus = loss({k: p - eps * v[k] for k, p in params.items()})
            numeric = (plus - minus) / (2 * eps)
            tried.append((eps, numeric))
            if abs(analytic - numeric) <= atol + rtol * abs(numeric):
                break
        else:
            steps = ", ".join(f"{n:.9g} at eps {e:.2g}" for e, n in tried)
            raise AssertionError(
                f"{where} direction {i}: <gradient, v> = {analytic:.9g} but central "
                f"differences give {steps} (rtol {rtol:g}, atol {atol:g})")


def assert_trajectory_close(actual: Sequence[float], expected: Sequence[float], *, rtol: float,
                            atol: float, where: str = "") -> None:
    """Per-step losses match; a NaN or a departure is reported at the step where it began."""
    for step, (a, e) in enumerate(zip(actual, expected, strict=True)):
        if not np.isfinite(a):
            raise AssertionError(f"{where}: loss diverged to {a} at step {step}")
        allowed = (rtol + atol) * abs(e)  # a scalar's own magnitude is its scale
        if abs(a - e) > allowed:
            raise AssertionError(
                f"{where}: loss departs from the reference at step {step}: {a:.8g} vs {e:.8g}, "
                f"|diff| {abs(a - e):.3g} > (rtol {rtol:.3g} + atol {atol:.3g}) * |expected| "
                f"= {allowed:.3g}")


def assert_at_step(actual: np.ndarray, expected: Mapping[int, np.ndarray], *, step: int,
                   outside: str = "", where: str = "") -> None:
    """A parameter vector is the reference trajectory's ``step``, not a step before or after:
    of the steps in ``expected`` (flat float64 vectors), ``expected[step]`` is the nearest.

    An honest run's rounding drifts away from the reference, mostly across the trajectory
    rather than along it, and by more than half a step late in training, where steps shrink
    (gpt's Adam in fp32 at seed 5: 0.016 from the reference's step 100, whose neighbours are
    0.031 away; vit's SGD at seed 1, near convergence: 0.0195 from step 80, neighbours 0.0094
    away, and still nearest step 80: 0.0214 to 79, 0.0220 to 81). Drift
    across the trajectory adds the same to the distance to every step, so the nearest step is
    still the one the run is at; parameters a step behind are nearest the step before,
    however far they have drifted across. (Half a step's distance as the limit, the rule
    before, failed that honest run.) The message names the step of ``expected`` nearest to
    ``actual``, with the distances; ``outside`` says what else it failed (the tolerance check
    the caller tried first)."""
    a = np.asarray(actual, np.float64)
    prefix = f"{where}: " if where else ""
    also = f"; outside the trajectory tolerance too: {outside}" if outside else ""
    if a.shape != np.shape(expected[step]):
        raise AssertionError(f"{prefix}{a.size} parameters, the reference's "
                             f"{np.size(expected[step])}{also}")
    if not np.all(np.isfinite(a)):
        raise AssertionError(f"{prefix}non-finite parameters{also}")
    if not any(s in expected for s in (step - 1, step + 1)):
        raise ValueError(f"assert_at_step needs step {step - 1} or {step + 1} of the reference")
    distance = {s: float(np.linalg.norm(a - v)) for s, v in expected.items()}
    nearest = min(distance, key=lambda s: (distance[s], abs(s - step)))
    if nearest == step:
        return
    side = "behind" if nearest < step else "ahead"
    raise AssertionError(
        f"{prefix}the parameters are nearest the reference's step {nearest}, not {step}: "
        f"{abs(step - nearest)} step(s) {side} (distance {distance[nearest]:.3g} to step "
        f"{nearest}, {distance[step]:.3g} to step {step}; steps {min(expected)} to "
        f"{max(expected)} searched, distances over all parameters){also}")


def assert_no_retrace(actual: int, expected: int, *, where: str = "") -> None:
    """Nothing was traced or compiled again during the timed rounds."""
    if actual != expected:
        raise AssertionError(f"{where}: compiled during timing: {actual - expected} new "
                             f"trace(s) or compilation(s) after {expected} before it; compile "
                             "time leaked into the measurement, or a second compiled function "
                             "ran only while timed (changing shapes, dtypes or Python values?)")


def assert_variant_applied(traces: Sequence[int], variant: str, *, where: str = "") -> None:
    """A compiled variant must actually have compiled something (chex's variants do the same)."""
    if variants.mode(variant) == "eager":
        return
    if not traces:
        raise AssertionError(f"{where}: variant {variant!r} was never applied: the "
                             "implementation did not pass its step through case.compile()")
    if min(traces) < 1:
        raise AssertionError(f"{where}: variant {variant!r} compiled nothing: a function passed "
                             "through case.compile() was never traced")


def assert_eager(compiles: Mapping[str, int], variant: str, *, where: str = "") -> None:
    """An eager case compiled nothing at all: no dynamo frame, no tf.function trace, no jitted
    function of its own (op-by-op dispatch is what eager means)."""
    if variants.mode(variant) != "eager":
        return
    found = {phase: n for phase, n in compiles.items() if n}
    if found:
        detail = ", ".join(f"{n} during {phase}" for phase, n in found.items())
        raise AssertionError(f"{where}: the eager variant compiled ({detail}): eager means op "
                             "by op; a jit, torch.compile or tf.function inside an eager "
                             "implementation makes it another variant")


def assert_census(found: int | None, expected: int, *, what: str, where: str = "") -> None:
    """The framework's own count of trainable elements equals the spec's parameters."""
    if found is not None and found != expected:
        raise AssertionError(f"{where}: {what} hold {found} trainable elements, the spec's "
                             f"parameters {expected}: a parameter (a bias?) trains without "
                             "being reported, or one is missing")


SHARD_SLACK_BYTES = 64  # a step count, alignment: what no honest layout is held to


def sharded_bytes(shape: tuple[int, ...], itemsize: int, layout: Layout,
                  axis: int | None) -> int:
    """The most one worker honestly holds of a tensor of ``shape`` under ``layout``:
    fsdp, a shard along an axis that divides into the data axis (torch's FSDP2 always shards
    the first, padding it: a row more at most), else the whole; tp and dpxtp, the plan's
    ``axis`` divided by the model axis, else the whole; dp, the whole."""
    whole = int(np.prod(shape, dtype=np.int64)) * itemsize
    data_n, model_n = layout.mesh
    if layout.strategy == "fsdp" and shape and any(n % data_n == 0 for n in shape):
        padded = -(-shape[0] // data_n) * (whole // max(shape[0], 1))
        return max(whole // data_n, padded)
    if layout.strategy in ("tp", "dpxtp") and axis is not None:
        return whole // model_n
    return whole


def assert_sharded(resident: Mapping[str, Sequence[int]], shapes: Mapping[str, tuple[int, ...]],
                   itemsize: int, slots: int, layout: Layout,
                   split_axis: Callable[[str], int | None], *, where: str = "") -> None:
    """No worker holds more parameter, gradient or optimizer-state bytes than its strategy
    leaves it (``sharded_bytes`` per parameter; the optimizer's ``slots`` per parameter), and
    every worker reported."""
    one = sum(sharded_bytes(shape, itemsize, layout, split_axis(name))
              for name, shape in shapes.items())
    bounds = {"params": one, "grads": one, "optimizer_state": slots * one}
    whole = sum(int(np.prod(s, dtype=np.int64)) for s in shapes.values()) * itemsize
    for what, held in resident.items():
        if what not in bounds:
            raise AssertionError(f"{where}: the engine reported {what!r}; expected params, "
                                 "grads, optimizer_state")
        if len(held) != layout.workers:
            raise AssertionError(f"{where}: {len(held)} worker(s) said what they hold, the "
                                 f"{layout.strategy} layout has {layout.workers}")
        for rank, found in enumerate(held):
            if found > bounds[what] + SHARD_SLACK_BYTES:
                copies = found / (whole * (slots if what == "optimizer_state" else 1) or 1)
                raise AssertionError(
                    f"{where}: worker {rank} holds {found:,} bytes of {what.replace('_', ' ')}"
                    f", more than {bounds[what]:,}, what {layout.label} leaves a worker "
                    f"({copies:.2f} of a whole copy): the {layout.strategy} strategy is "
                    "claimed but that state is not sharded as it says")


def assert_plausible(gflops: float | None, peak: float | None, *, margin: float,
                     where: str = "") -> None:
    """Achieved GFLOP/s cannot exceed the machine's measured matrix-multiply peak."""
    if gflops is None or not peak:
        return
    if gflops > peak * (1 + margin):
        raise AssertionError(
            f"{where}: physically implausible: {gflops:.1f} GFLOP/s achieved, but this "
            f"machine's matrix-multiply peak for the dtype measured {peak:.1f} GFLOP/s in this "
            f"session (margin {margin:.0%}); the timed step did less work than its FLOP count "
            "says, or the spec's flops_per_step over-counts")


def assert_threads(found: Mapping[str, Any], expected: int, *, where: str = "") -> None:
    """Every thread control the framework reports holds the session's thread count."""
    wrong = {k: v for k, v in found.items() if isinstance(v, int) and v != expected}
    if wrong:
        raise AssertionError(f"{where}: thread counts differ from --mlbench-threads={expected}: "
                             + ", ".join(f"{k}={v}" for k, v in sorted(wrong.items())))
