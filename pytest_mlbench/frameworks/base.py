"""The one small interface every framework adapter implements, plus shared helpers."""

from __future__ import annotations

import contextlib
import time
import tracemalloc
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Protocol

import numpy as np

from pytest_mlbench.errors import Unsupported
from pytest_mlbench.precision import Policy


@dataclass
class Compiled:
    """A step function after a variant's transform, with a count of its traces/compilations.

    ``traces()`` must rise on the first call of a compiled variant (proof the transform was
    applied) and stay flat during timing (the retrace guard). ``guard`` wraps the timed
    region, for frameworks that can turn a recompile into an error there. ``first_call_s``
    is the wall time of the first call: tracing, compilation and one dispatch, whichever
    method of the trainer made it.
    """

    fn: Callable[..., Any]
    variant: str
    traces: Callable[[], int] = lambda: 0
    guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    name: str = ""
    first_call_s: float | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.first_call_s is not None:
            return self.fn(*args, **kwargs)
        start = time.perf_counter()
        out = self.fn(*args, **kwargs)
        self.first_call_s = time.perf_counter() - start
        return out


class Adapter(Protocol):
    """What the harness needs from a framework. One file per framework implements it."""

    name: str
    modules: tuple[str, ...]  # import names that must be present (checked without importing)
    extra: str  # the pytest-mlbench extra that installs it
    variants: tuple[str, ...]  # the compile variants this framework has

    def devices(self) -> dict[str, str]:
        """Device kinds present, mapped to a description (``{"cpu": "...", "gpu": "A100"}``)."""

    def setup(self, device: str, policy: Policy, seed: int) -> None:
        """Select the device, apply the precision policy and verify it took effect, seed."""

    def asarray(self, array: np.ndarray) -> Any:
        """A NumPy array (already at the policy dtype) as a framework array on the device."""

    def to_numpy(self, value: Any) -> np.ndarray:
        """Back to NumPy, keeping the dtype (bfloat16 as ml_dtypes.bfloat16)."""

    def sync(self, value: Any) -> None:
        """Block until the work that produced ``value`` has finished."""

    def compile(self, fn: Callable[..., Any], variant: str) -> Compiled:
        """Apply a variant's transform to ``fn``; ``eager`` returns it unchanged."""

    def versions(self) -> dict[str, str]:
        """Versions of the framework's packages."""

    def peak_memory(self, run: Callable[[], None]) -> tuple[int, str] | None:
        """Peak bytes allocated while ``run()`` executes one synchronised step, and the scope
        of that figure (``"step"``, or ``"process"`` when the framework cannot reset its peak);
        None when the framework cannot tell on this device."""

    def threads(self) -> dict[str, Any]:
        """Thread settings the framework will use."""


class TraceCounter:
    """Wraps a Python function and counts how often it runs: under a tracing jit, that is
    how often it was traced. Hashable by identity, as jax.jit requires."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn, self.count = fn, 0
        self.__name__ = getattr(fn, "__name__", "step")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self.fn(*args, **kwargs)


def tracemalloc_peak(run: Callable[[], None]) -> tuple[int, str]:
    """Peak of the allocations tracemalloc sees during ``run()``: NumPy registers its array
    buffers with it, so this is the step's peak NumPy memory."""
    already = tracemalloc.is_tracing()
    if not already:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        run()
        return tracemalloc.get_traced_memory()[1] - base, "step"
    finally:
        if not already:
            tracemalloc.stop()


def package_versions(*names: str) -> dict[str, str]:
    out = {}
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


def eager_only(name: str, fn: Callable[..., Any], variant: str) -> Compiled:
    if variant != "eager":
        raise Unsupported(f"{name} has no {variant} variant")
    return Compiled(fn, variant)


def require_cpu_policy(name: str, device: str, policy: Policy) -> None:
    """For NumPy-based frameworks: CPU only, float32/float64 only."""
    if device != "cpu":
        raise Unsupported(f"{name} runs on the CPU only")
    if policy.dtype == "bfloat16":
        raise Unsupported(f"{name} has no bfloat16 arithmetic")
    if policy.gpu_only:
        raise Unsupported(f"{policy.name} applies to NVIDIA GPUs only")


@contextlib.contextmanager
def no_guard() -> Iterator[None]:
    yield


def np_copy(tree: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {k: np.array(v, copy=True) for k, v in tree.items()}
