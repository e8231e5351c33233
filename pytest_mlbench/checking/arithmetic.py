"""Which precision a case's arithmetic ran in, judged from its results, not its settings.

The policy checks read flags (JAX's x64, TF32, matmul precision) and the parameters' dtypes.
Neither sees a float32 case whose forward casts to float64 and back, nor one that computes in
bfloat16 inside a float32 step. Its results do, against the float64 reference the checks
already have (framework-independent, so NumPy, Numba and Autograd are covered too):

- *too exact*: float32 arithmetic rounds at every operation, so a gradient or output made of
  reductions differs from the float64 reference correctly rounded to float32 in most
  elements. A result equal to it in nearly every element was computed in float64 and cast.
- *too coarse*: an error against the float64 reference, norm-wise over all elements, far
  beyond what the case's precision leaves (in units of its unit roundoff) was computed in a
  lower precision (bfloat16, float16 or TF32 inside a float32 case, float32 inside float64),
  even where a workload's wide tolerance would still pass it.

Only informative statistics are judged: at least MIN_ELEMENTS non-zero elements; where the
harness can compute the same result honestly in NumPy float32 (a hand-derived gradient, a
forward pass), "too exact" is judged only when that honest computation is not itself nearly
exact. bf16 and tf32 cases are not judged (their arithmetic is allowed to differ from their
storage by design); mixed-precision cases (amp, amp16) are judged the other way round: their
results must show the compute dtype's rounding, not only the storage dtype's.

Thresholds, measured over every honest suite implementation (correctness sessions, smoke
size all cases, default size the main job; the gradient where training took the parameters
too): float32 results were 4-33% correctly rounded with errors of 0.9-13 units of roundoff;
float64 cast to float32, 100% and 0.4 units; TF32 matmuls (H200) 5e3 units; bfloat16 matmuls
in a float32 case 5e4-7e4 units; float32 arithmetic in a float64 case 1.5e9 units of
float64's roundoff, honest float64 at most 9.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads.data import is_float

MIN_ELEMENTS = 256  # non-zero elements below which neither statistic is read
EXACT = 0.9  # fraction correctly rounded at or above which a float32 result is float64's
HONEST_EXACT = 0.80  # an honest float32 computation this exact makes "too exact" uninformative
COARSE = {"float32": 2.0e3, "float64": 1.0e6}  # error, in units of the dtype's roundoff
# "too precise": over the PRECISE_POINTS results of the seeded start (the gradient on the
# seeded data and on public batches 1.., or the first probes), the geometric mean of each
# one's error over what float32 at its most precise leaves (every operation of the spec's own
# NumPy function correctly rounded once: ideal_result) under PRECISE: part of the computation
# ran in float64. Honest float32 code 1.30 at least (a softmax regression whose reductions
# are 10-64 long, Autograd's pairwise sums), the float64-forward mlp 1.07 at most (20 seeds):
# docs/MEASURING.md, "Thresholds, calibrated on honest code"
PRECISE = 1.18
PRECISE_POINTS = 8
JUDGED = {"fp32": "float32", "fp64": "float64"}  # policy name -> the dtype its arithmetic is
# mixed-precision policies -> (storage dtype, compute dtype): a result as exact as storage-dtype
# arithmetic leaves (within COARSE of it) was not computed at the compute dtype
MIXED = {p.name: (p.dtype, p.compute) for p in POLICIES.values() if p.mixed}
UNIT = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11,
        "bfloat16": 2.0 ** -8}  # unit roundoff of each dtype
FORMATS = {"float64": UNIT["float64"], "float32": UNIT["float32"],
           "float16 or TF32": UNIT["float16"],
           "bfloat16": UNIT["bfloat16"]}  # the formats a result may have been made in, by name


@dataclass(frozen=True)
class Statistic:
    """What a result says of the arithmetic that made it, against the float64 reference."""

    elements: int  # non-zero, finite, normal elements judged
    exact: float  # fraction equal to the reference correctly rounded to the dtype
    error: float  # ||actual - expected|| / ||expected||, in units of the dtype's roundoff

    def as_record(self) -> dict[str, float | None]:
        return {"elements": self.elements, "exact": round(self.exact, 4),
                "error": float(f"{self.error:.4g}") if math.isfinite(self.error) else None}


def _flat(tree: Any) -> np.ndarray:
    """Every floating element of a result (array or mapping of arrays), float64, in key order."""
    if isinstance(tree, Mapping):
        parts = [_flat(tree[k]) for k in sorted(tree)]
        return np.concatenate(parts) if parts else np.zeros(0)
    array = np.asarray(tree)
    if not is_float(array):
        return np.zeros(0)
    return np.asarray(array, np.float64).ravel()


def measure(actual: Any, expected: Any, dtype: str) -> Statistic:
    """``actual`` (any floating dtype) against the float64 ``expected`` for arithmetic in
    ``dtype``: elements where the reference is zero, subnormal in ``dtype`` or not finite (or
    the result not finite: other checks say so) are left out."""
    a, e = _flat(actual), _flat(expected)
    if a.shape != e.shape:
        return Statistic(0, 0.0, math.nan)
    tiny = float(np.finfo(dtype).tiny)
    keep = np.isfinite(e) & np.isfinite(a) & (np.abs(e) >= tiny)
    a, e = a[keep], e[keep]
    if a.size == 0:
        return Statistic(0, 0.0, math.nan)
    exact = float(np.mean(a.astype(dtype) == e.astype(dtype)))
    error = float(np.linalg.norm(a - e) / np.linalg.norm(e)) / FORMATS[dtype]
    return Statistic(int(a.size), exact, error)


def _nearest_format(relative: float) -> str:
    """The format whose unit roundoff is nearest (log scale) to a relative error."""
    return min(FORMATS, key=lambda f: abs(math.log2(max(relative, 1e-300) / FORMATS[f])))


def assert_arithmetic_precision(actual: Any, expected: Any, *, policy: str, where: str,
                                honest: Statistic | None = None,
                                coarse: bool = True) -> dict[str, Any]:
    """``actual`` was computed in the arithmetic the policy names, as far as its elements
    tell. ``honest``: the same statistic of an honest computation at the policy's dtype, made
    by the harness, where one exists. ``coarse=False`` judges only "too exact" (a gradient
    near convergence has cancelled: its relative error grows honestly). Returns what was
    judged, for the record."""
    if policy in MIXED:
        return assert_mixed_arithmetic(actual, expected, policy=policy, where=where)
    dtype = JUDGED.get(policy)
    if dtype is None:
        return {"judged": False, "why": f"{policy}: arithmetic may differ from storage"}
    found = measure(actual, expected, dtype)
    record: dict[str, Any] = {**found.as_record(), "judged": False}
    if honest is not None:
        record["harness_float32"] = honest.as_record()
    if found.elements < MIN_ELEMENTS:
        record["why"] = f"{found.elements} non-zero element(s), fewer than {MIN_ELEMENTS}"
        return record
    record["judged"] = True
    if coarse:
        assert_not_coarser(found, dtype, where=where)
    if dtype == "float32":
        if honest is not None and honest.exact >= HONEST_EXACT:
            record["why"] = (f"too exact not judged: the harness's own float32 computation is "
                             f"{honest.exact:.0%} correctly rounded")
            return record
        assert_not_more_exact(found, dtype, honest, where=where)
    return record


def assert_mixed_arithmetic(actual: Any, expected: Any, *, policy: str,
                            where: str) -> dict[str, Any]:
    """A mixed-precision result really was computed at the policy's compute dtype: its error
    against the float64 reference is beyond what arithmetic at the storage dtype leaves
    (COARSE units of its roundoff). A framework that ignored the policy (autocast that
    matched no op, a cast left out) computes at float32 and fails here, whatever its
    tolerance would let pass."""
    storage, compute = MIXED[policy]
    found = measure(actual, expected, storage)
    record: dict[str, Any] = {**found.as_record(), "judged": False}
    if found.elements < MIN_ELEMENTS:
        record["why"] = f"{found.elements} non-zero element(s), fewer than {MIN_ELEMENTS}"
        return record
    record["judged"] = True
    limit = COARSE[storage]
    if found.error <= limit:
        relative = found.error * FORMATS[storage]
        raise AssertionError(
            f"{where}: the arithmetic ran in {storage}, not the {compute} compute the {policy} "
            f"policy claims: a relative error of {relative:.3g} against the float64 reference "
            f"over {found.elements} elements, {found.error:.3g} times {storage}'s unit "
            f"roundoff, where {storage} arithmetic leaves at most {limit:g} and {compute} "
            f"compute about {UNIT[compute] / UNIT[storage]:.3g}")
    return record


def assert_not_coarser(found: Statistic, dtype: str, *, where: str) -> None:
    """The error against float64 is within what ``dtype`` arithmetic leaves (COARSE)."""
    limit = COARSE[dtype]
    if found.error > limit:
        relative = found.error * FORMATS[dtype]
        raise AssertionError(
            f"{where}: the arithmetic ran in a lower precision than the case's {dtype} "
            f"(error the size of {_nearest_format(relative)} rounding): a relative error of "
            f"{relative:.3g} against the float64 reference over {found.elements} elements, "
            f"{found.error:.3g} times {dtype}'s unit roundoff, where {dtype} arithmetic "
            f"leaves at most {limit:g}")


def assert_not_more_exact(found: Statistic, dtype: str, honest: Statistic | None, *,
                          where: str) -> None:
    """Not (nearly) every element equals the float64 reference correctly rounded to
    ``dtype``: that result was computed in float64 and cast."""
    if found.exact < EXACT:
        return
    baseline = (f"; the harness's own {dtype} computation of it: {honest.exact:.1%}"
                if honest is not None else "")
    raise AssertionError(
        f"{where}: the arithmetic ran in float64, not the case's {dtype}: "
        f"{found.exact:.1%} of {found.elements} elements equal the float64 reference "
        f"correctly rounded to {dtype} (relative error {found.error * FORMATS[dtype]:.3g}, "
        f"{found.error:.3g} times {dtype}'s unit roundoff), where {dtype} arithmetic rounds "
        f"fewer than {EXACT:.0%} of them so{baseline}")


def precise_ratio(points: Sequence[tuple[Statistic, Statistic]]) -> tuple[float, int] | None:
    """The geometric mean over the informative ``points`` (a result's statistic, float32 at
    its most precise's) of error over ideal error, and how many; None where none is."""
    ratios = [found.error / ideal.error for found, ideal in points
              if min(found.elements, ideal.elements) >= MIN_ELEMENTS and ideal.error > 0
              and math.isfinite(found.error) and math.isfinite(ideal.error)]
    if not ratios:
        return None
    return math.exp(sum(math.log(max(r, 1e-300)) for r in ratios) / len(ratios)), len(ratios)


def assert_not_more_precise(points: Sequence[tuple[Statistic, Statistic]], dtype: str, *,
                            where: str) -> dict[str, Any]:
    """Over the seeded start's results (``points``: each result's statistic beside float32
    at its most precise's, ideal_result), the errors against float64 are not under PRECISE
    times what ``dtype`` arithmetic with every operation correctly rounded once leaves: part
    of the computation ran in float64 (a forward cast back before the loss, whose gradient
    then flows in float64), which no result correctly rounded at the end shows as too exact.
    Judged at points no run's secrets move, over several so that one point's rounding luck
    does not decide. Returns what was judged, for the record."""
    found = precise_ratio(points)
    if found is None:
        return {"judged": False, "why": "no informative point"}
    ratio, count = found
    if ratio >= PRECISE:
        return {"judged": True, "ratio": round(ratio, 4), "points": count}
    raise AssertionError(
        f"{where}: part of the arithmetic ran in float64, not the case's {dtype}: over "
        f"{count} result(s) at the seeded start, an error {ratio:.3g} times what {dtype} "
        f"arithmetic with every operation correctly rounded once leaves (geometric mean), "
        f"where honest {dtype} code leaves at least {PRECISE:g} times it (its reductions "
        f"accumulate in {dtype})")


def honest_result(workload: Any, task: Any, params: Mapping[str, np.ndarray],
                  inputs: Mapping[str, np.ndarray], probe: Mapping[str, np.ndarray] | None,
                  ) -> Any | None:
    """The case's checked result computed by the harness at the case's dtype from the spec's
    NumPy functions (a hand-derived gradient, a forward pass), or None where the spec has none
    or its functions do not keep the dtype."""
    result = _spec_result(workload, task, params, inputs, probe)
    if result is None:
        return None
    dtype = next(v.dtype for v in params.values() if is_float(v))
    leaves = result.values() if isinstance(result, Mapping) else [result]
    if any(np.asarray(v).dtype != dtype for v in leaves):
        return None
    return result


def _spec_result(workload: Any, task: Any, params: Mapping[str, Any],
                 inputs: Mapping[str, Any], probe: Mapping[str, Any] | None) -> Any | None:
    """The spec's own NumPy function for the case's checked result, called on the arrays
    given, or None where there is none or it fails on them."""
    try:
        with np.errstate(all="ignore"):  # float32 overflow is the statistic's, not an error
            if task.kind == "train" and workload.grad is not None:
                return workload.grad(dict(params), dict(inputs))
            if task.kind == "infer" and workload.forward is not None and probe is not None:
                return workload.forward(np, dict(params), {**inputs, **probe})
    except (ArithmeticError, TypeError, ValueError):
        pass  # a spec function written for float64 only: no baseline, judged without
    return None


class _Rounded(np.ndarray):
    """A float64 array whose every NumPy operation (ufuncs, their reductions and every other
    NumPy function) computes in float64 and rounds its floating result to float32: float32
    arithmetic at its most precise, each operation correctly rounded once."""

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _round(getattr(ufunc, method)(*_plain(inputs), **kwargs))

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _round(func(*_plain(args), **kwargs))


def _plain(values: Any) -> Any:
    if isinstance(values, _Rounded):
        return values.view(np.ndarray)
    if isinstance(values, list | tuple):
        return type(values)(_plain(v) for v in values)
    return values


def _round(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_round(v) for v in value)
    if isinstance(value, np.ndarray | np.floating) and np.issubdtype(value.dtype, np.floating):
        return np.asarray(value, np.float32).astype(np.float64).view(_Rounded)
    return value


def ideal_result(workload: Any, task: Any, params: Mapping[str, np.ndarray],
                 inputs: Mapping[str, np.ndarray], probe: Mapping[str, np.ndarray] | None,
                 ) -> Any | None:
    """The case's checked result from the spec's NumPy function with every operation
    correctly rounded to float32 (computed in float64, rounded once): the least error float32
    arithmetic leaves. An honest float32 computation rounds at least as often, and its
    reductions accumulate in float32 besides; part of a computation run in float64 skips
    roundings and comes in under it. None where the spec has no such function."""
    def rounded(arrays: Mapping[str, np.ndarray] | None) -> dict[str, Any] | None:
        return None if arrays is None else {
            k: np.asarray(v, np.float32).astype(np.float64).view(_Rounded) if is_float(v)
            else v for k, v in arrays.items()}

    result = _spec_result(workload, task, rounded(params) or {}, rounded(inputs) or {},
                          rounded(probe))
    if result is None:
        return None
    if isinstance(result, Mapping):
        return {k: np.asarray(v, np.float32) for k, v in result.items()}
    return np.asarray(result, np.float32)


def lower_precision_hint(actual: Any, expected: Any, *, policy: str) -> str | None:
    """For a result that failed its norm-wise tolerance: a line saying its error is the size
    of a lower precision's rounding (bfloat16, float16/TF32, float32 in a float64 case), or
    None where it is not (a bug is usually far larger, or the statistic not informative)."""
    dtype = JUDGED.get(policy)
    if dtype is None:
        return None
    found = measure(actual, expected, dtype)
    relative = found.error * FORMATS[dtype]
    if found.elements < MIN_ELEMENTS or not COARSE[dtype] < found.error:
        return None
    nearest = _nearest_format(relative)
    if nearest in (dtype, "float64") or relative > 8 * FORMATS["bfloat16"]:
        return None
    return (f"the error is the size of {nearest} rounding (relative {relative:.3g} over "
            f"{found.elements} elements, {found.error:.3g} times {dtype}'s unit roundoff): "
            f"the arithmetic probably ran in {nearest}, not the case's {dtype}")
