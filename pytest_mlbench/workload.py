"""Workloads as data: a frozen spec declares shapes, dtype policy inputs, learning rate, init,
the float64 reference and which frameworks implement it. No harness code per workload."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_mlbench.precision import POLICIES

Arrays = dict[str, np.ndarray]
# (what is checked, a loss of the params, its gradient at the check's point or None)
ReferenceCheck = tuple[str, Callable[[Arrays], float], Arrays | None]


@dataclass(frozen=True)
class Shape:
    """One problem size. ``label`` joins the test id when set (``d10``, ``b4096``)."""

    dims: Mapping[str, int]
    label: str = ""
    steps_per_call: int = 1  # training steps inside one timed call, one sync at its end
    rounds: int | None = None  # fixed rounds instead of pytest-benchmark's calibration


@dataclass(frozen=True)
class Workload:
    """A training-step workload: SGD on ``loss`` from seeded data and weights.

    ``make_data`` and ``make_params`` draw float64 arrays from the Generator they are given
    (the harness rounds them to the policy's dtype); ``loss`` and ``grad`` are the NumPy
    reference, exact in float64; ``implementations`` maps each framework to its variants,
    and each has a file ``impl_<framework>.py`` beside the spec with ``build(case)``.
    """

    name: str
    summary: str
    sizes: Mapping[str, tuple[Shape, ...]]
    learning_rate: float
    make_data: Callable[[np.random.Generator, Mapping[str, int]], Arrays]
    make_params: Callable[[np.random.Generator, Mapping[str, int]], Arrays]
    loss: Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], float]
    grad: Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], Arrays]
    flops_per_step: Callable[[Mapping[str, int]], int]
    implementations: Mapping[str, tuple[str, ...]]
    # (framework | variant | precision | device, ...) -> reason; a case matching all parts skips
    unsupported: Mapping[tuple[str, ...], str] = field(default_factory=dict)
    check_steps: int = 3  # steps of the trajectory check before timing
    # When ``grad`` is not the gradient of ``loss`` (DP-SGD clips each example's gradient), what
    # the finite-difference check of the reference verifies instead: given float64 params and
    # data, (what, loss of the params, its gradient at them) triples; a None gradient stands
    # for ``grad(params, data)`` itself. None: verify ``grad`` as the gradient of ``loss``.
    reference_checks: Callable[[Arrays, Arrays], Sequence[ReferenceCheck]] | None = None
    # Precision policies run when the user names none (--mlbench-precision/ini unset); None
    # means the session fallback (fp32). A linear-regression sweep, say, defaults to fp64.
    default_precisions: tuple[str, ...] | None = None
    # Seeds the Generator instead of ``name``: a workload that re-implements another (the
    # layer-API MLP) names it here and gets byte-identical data and weights.
    data_key: str | None = None

    def __post_init__(self) -> None:
        wanted = self.default_precisions
        if wanted is not None and (not wanted or not set(wanted) <= set(POLICIES)):
            raise ValueError(f"workload {self.name!r}: default_precisions={wanted!r} must be a "
                             f"non-empty tuple of policy names ({', '.join(POLICIES)})")

    def unsupported_reason(self, *parts: str) -> str | None:
        for key, reason in self.unsupported.items():
            if set(key) <= set(parts):
                return reason
        return None

    def reference_trajectory(self, params: Arrays, data: Arrays, steps: int,
                             dtype: Any) -> tuple[list[float], Arrays]:
        """Losses before each of ``steps`` SGD steps and the final params, computed in float64
        and rounded to ``dtype`` after each step, as storage at that dtype would round them."""
        wide = {k: v.astype(np.float64) for k, v in data.items()}
        current = {k: v.astype(np.float64) for k, v in params.items()}
        losses = []
        for _ in range(steps):
            losses.append(float(self.loss(current, wide)))
            g = self.grad(current, wide)
            current = {k: (p - self.learning_rate * g[k]).astype(dtype).astype(np.float64)
                       for k, p in current.items()}
        return losses, current
