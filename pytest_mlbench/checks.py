"""Correctness checks, all named assert_*, all (actual, expected, *, rtol, atol, ...).

Messages say what differed, where (the worst element's index), by how much and against which
tolerance, so a failing benchmark reads like a bug report. Tolerances by precision live in
TOLERANCES and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_mlbench.data import widen


@dataclass(frozen=True)
class Tolerance:
    """``atol`` is a fraction of the largest |expected| entry of each array, so one table
    serves gradients of any scale; ``rtol`` is relative to each element."""

    rtol: float
    atol: float


@dataclass(frozen=True)
class Tolerances:
    grad: Tolerance  # loss and gradient at the start, against the float64 reference
    trajectory: Tolerance  # losses and parameter displacement after a few steps


TOLERANCES: dict[str, Tolerances] = {
    "fp64": Tolerances(Tolerance(1e-7, 1e-9), Tolerance(1e-6, 1e-8)),
    "fp32": Tolerances(Tolerance(1e-4, 1e-5), Tolerance(1e-3, 1e-4)),
    "tf32": Tolerances(Tolerance(1e-2, 1e-2), Tolerance(3e-2, 3e-2)),
    "bf16": Tolerances(Tolerance(6e-2, 6e-2), Tolerance(1.5e-1, 1.5e-1)),
}


def _fmt_index(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]" if index else "(scalar)"


def assert_allclose(actual: Any, expected: Any, *, rtol: float, atol: float, where: str = "") -> None:
    """|actual - expected| <= atol + rtol * |expected| everywhere, shapes equal, all finite."""
    a, e = np.asarray(widen({"x": np.asarray(actual)})["x"]), np.asarray(expected, np.float64)
    prefix = f"{where}: " if where else ""
    if a.shape != e.shape:
        raise AssertionError(f"{prefix}shape {a.shape} != expected {e.shape}")
    if not np.all(np.isfinite(a)):
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
        raise AssertionError(f"{prefix}non-finite value {a[bad]} at {_fmt_index(bad)}")
    diff = np.abs(a - e)
    allowed = atol + rtol * np.abs(e)
    over = diff > allowed
    if over.any():
        worst = np.unravel_index(np.argmax(diff - allowed), diff.shape)
        raise AssertionError(
            f"{prefix}{int(over.sum())} of {diff.size} elements differ; worst at "
            f"{_fmt_index(tuple(int(i) for i in worst))}: actual {a[worst]:.6g}, expected "
            f"{e[worst]:.6g}, |diff| {diff[worst]:.3g} > atol {atol:.3g} + rtol {rtol:.3g} * "
            f"|expected| = {allowed[worst]:.3g}")


def assert_trees_close(actual: Mapping[str, Any], expected: Mapping[str, Any], *, rtol: float,
                       atol: float, where: str = "") -> None:
    """assert_allclose per named array; here ``atol`` scales with each array's largest entry."""
    assert_same_keys(actual, expected, where=where)
    for key in sorted(expected):
        e = np.asarray(expected[key], np.float64)
        scale = float(np.max(np.abs(e))) if e.size else 0.0
        assert_allclose(actual[key], e, rtol=rtol, atol=atol * scale, where=f"{where} {key}")


def assert_same_keys(actual: Mapping[str, Any], expected: Mapping[str, Any], *,
                     where: str = "") -> None:
    if set(actual) != set(expected):
        extra, missing = sorted(set(actual) - set(expected)), sorted(set(expected) - set(actual))
        raise AssertionError(f"{where}: parameters differ from the spec: extra {extra}, "
                             f"missing {missing}")


def assert_identical(actual: Mapping[str, Any], expected: Mapping[str, np.ndarray], *,
                     where: str = "") -> None:
    """Bit-for-bit equality of named arrays: every implementation starts from the same bytes."""
    assert_same_keys(actual, expected, where=where)
    for key in sorted(expected):
        a, e = np.asarray(actual[key]), expected[key]
        if a.dtype != e.dtype or a.shape != e.shape or a.tobytes() != e.tobytes():
            raise AssertionError(f"{where} {key}: starts from {a.dtype}{list(a.shape)} that is not"
                                 f" the seeded {e.dtype}{list(e.shape)} (data digest differs)")


def assert_dtypes(actual: Mapping[str, str], expected: str, *, where: str = "") -> None:
    """Every named array has the policy's dtype (no silent float64 or float32 drift)."""
    wrong = {k: v for k, v in sorted(actual.items()) if v != expected}
    if wrong:
        raise AssertionError(f"{where}: dtype is not the policy's {expected}: {wrong}")


def assert_grad_matches_finite_differences(
    loss: Callable[[Any], float],
    grad: Mapping[str, np.ndarray],
    params: Mapping[str, np.ndarray],
    *,
    rtol: float,
    atol: float,
    rng: np.random.Generator,
    directions: int = 4,
    eps: float = 1e-6,
    where: str = "",
) -> None:
    """Directional derivatives of ``loss`` by central differences (float64) against <grad, v>."""
    for i in range(directions):
        v = {k: rng.standard_normal(p.shape) for k, p in params.items()}
        plus = loss({k: p + eps * v[k] for k, p in params.items()})
        minus = loss({k: p - eps * v[k] for k, p in params.items()})
        numeric = (plus - minus) / (2 * eps)
        analytic = sum(float(np.vdot(grad[k], v[k])) for k in params)
        assert_allclose(analytic, numeric, rtol=rtol, atol=atol,
                        where=f"{where} direction {i} (central differences, eps={eps:g})")


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


def assert_no_retrace(actual: int, expected: int, *, where: str = "") -> None:
    """The compiled step was not traced or compiled again during the timed rounds."""
    if actual != expected:
        raise AssertionError(f"{where}: recompiled during timing: {actual - expected} new "
                             f"trace(s) after {expected} in warm-up; compile time leaked into "
                             "the measurement (check for changing shapes, dtypes or Python "
                             "values passed to the step)")


def assert_variant_applied(traces: Sequence[int], variant: str, *, where: str = "") -> None:
    """A compiled variant must actually have compiled something (chex's variants do the same)."""
    if variant == "eager":
        return
    if not traces:
        raise AssertionError(f"{where}: variant {variant!r} was never applied: the "
                             "implementation did not pass its step through case.compile()")
    if min(traces) < 1:
        raise AssertionError(f"{where}: variant {variant!r} compiled nothing: a function passed "
                             "through case.compile() was never traced")
