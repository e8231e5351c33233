"""The one small interface every framework adapter implements, plus shared helpers.

Adapters run inside worker processes (engine/framework_worker.py), one framework per process. Besides
moving arrays and compiling, each adapter answers the questions the checks ask while a case is
timed: how many threads it uses, whether anything compiled (eager means eager; nothing
recompiles while timed), whether the precision policy still holds, and how many trainable
elements the framework sees behind an implementation.
"""

from __future__ import annotations

import contextlib
import functools
import time
import tracemalloc
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Protocol

import numpy as np

from pytest_mlbench.errors import PolicyNotApplied, Unsupported
from pytest_mlbench.precision import Policy


@dataclass
class Compiled:
    """A step function after a variant's transform, with a count of its traces/compilations.

    ``traces()`` must rise on the first call of a compiled variant (proof the transform was
    applied). ``guard`` wraps the timed region, for frameworks that can turn a recompile into
    an error there. ``first_call_s`` is the wall time of the first call: tracing, compilation
    and one dispatch, whichever method of the trainer made it.
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

    def verify_policy(self, policy: Policy) -> None:
        """Raise PolicyNotApplied when the framework's precision settings no longer match
        ``policy`` (an implementation switched TF32 or x64 after setup)."""

    def set_threads(self, threads: int) -> None:
        """Set the framework's own thread controls (intra-op ``threads``, inter-op 1)."""

    def threads(self) -> dict[str, Any]:
        """Thread counts as the framework reports them; integers must equal the setting."""

    def compile_events(self) -> int:
        """User-level compilations in this process so far (dynamo graphs, tf.function traces,
        jitted functions of user code): rises only when something compiles. An adapter whose
        framework also compiles behind the user's back (JAX's eager dispatch) adds
        ``backend_compiles()``, every compilation: nothing may rise while timed."""

    # optional: ``for_mode(mode) -> adapter``, the adapter a case of that compile mode runs
    # through (engine/server.py asks before setup): torch's xla mode is torch on torch_xla's
    # device (frameworks/torch_xla_.py); an adapter without it serves every mode itself.
    # optional, on the class: ``modes_need = {mode: (modules, how to install them)}``, what a
    # mode needs beyond ``modules`` (frameworks.missing_reason: its cases skip saying so)
    # optional: ``persistent_cache() -> (loaded, compiled)``, the compilations the framework's
    # persistent compile cache served in this process so far, and those it compiled instead
    # (engine/server.py reports a case's; measuring/cache_plan.py judges its compile figure
    # cold or from the cache); an adapter without it is judged by its XLA cache (TensorFlow)

    def census(self, root: Any) -> tuple[int, str] | None:
        """Trainable elements the framework enumerates behind ``root`` (an implementation's
        trainer), and what holds them; None when it holds nothing the framework enumerates."""

    def asarray(self, array: np.ndarray) -> Any:
        """A NumPy array (already at the policy dtype) as a framework array on the device."""

    def to_numpy(self, value: Any) -> np.ndarray:
        """Back to NumPy as a copy, keeping the dtype (bfloat16 as ml_dtypes.bfloat16)."""

    # optional: ``to_numpy_tree(mapping, readers) -> dict``, NumPy copies of a mapping's
    # values, where reading them together is cheaper (TensorFlow's variables: one op each,
    # read alone), keeping what it reuses in ``readers`` (the case's runner's, dropped with
    # it); an adapter without it has each copied by to_numpy (engine/runners.tree_to_numpy)
    # optional: ``take(value, rows) -> array``, rows ``rows`` (a NumPy integer array) of a
    # device array along its first axis, selected on the device: a training step's batch
    # (engine/server.py); an adapter without it has the rows sent from the host.
    # optional: ``on_device(value) -> bool``, whether a result is on the case's device
    # (engine/runners.assert_concrete, inside the clock; cheap: read, never moved).
    # optional: ``concrete_types() -> tuple[type, ...]``, the exact types of the framework's
    # own concrete arrays a timed call may return (engine/runners.concrete refuses any other
    # object, by exact type, before converting it inside the clock); an adapter without it
    # has whatever its calls return converted, unchecked

    def sync(self, value: Any) -> None:
        """Block until the work that produced ``value`` has finished."""

    def compile(self, fn: Callable[..., Any], variant: str,
                donate: tuple[int, ...] = ()) -> Compiled:
        """Apply a variant's transform to ``fn``; ``eager`` returns it unchanged. ``donate``:
        the positions of arguments whose buffers the compiled function may reuse for its
        outputs (JAX's donate_argnums); a framework without donation refuses them."""

    def matmul_gflops(self, dtype: str, n: int, repeats: int) -> float | None:
        """Best GFLOP/s of an n x n matmul at ``dtype`` over ``repeats``; None if unsupported."""

    def versions(self) -> dict[str, str]:
        """Versions of the framework's packages."""

    def peak_memory(self, run: Callable[[], None]) -> tuple[int, str] | None:
        """Peak bytes allocated while ``run()`` executes one synchronised step, and the scope
        of that figure (``"step"``, or ``"process"`` when the framework cannot reset its peak);
        None when the framework cannot tell on this device."""


class SettingsWatch:
    """Every change of a framework's precision settings made while a case runs (from setup's
    end to its next setup), recorded by the adapter's wrappers around the framework's setters.

    Checking the settings' values misses an implementation that turns TF32 on for each step
    and off again before returning: the values read right whenever they are asked. A record
    of every call does not."""

    def __init__(self) -> None:
        self.on = False
        self.changes: list[str] = []

    def record(self, what: str) -> None:
        if self.on:
            self.changes.append(what)

    def begin(self) -> None:
        """A case's setup begins: forget the previous case's changes, record nothing yet."""
        self.changes, self.on = [], False

    def start(self) -> None:
        """Setup is done: record from here."""
        self.on = True

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The adapter's own changes (the peak measurement) are not the case's."""
        was, self.on = self.on, False
        try:
            yield
        finally:
            self.on = was

    def check(self, framework: str, policy: Policy) -> None:
        if self.changes:
            shown = ", ".join(self.changes[:4]) + (
                f" and {len(self.changes) - 4} more" if len(self.changes) > 4 else "")
            raise PolicyNotApplied(f"{framework} precision settings were changed while the case "
                                   f"ran ({len(self.changes)} call(s): {shown}); the "
                                   f"{policy.name} policy holds for every step or the case "
                                   "is another precision")


class TraceCounter:
    """Wraps a Python function and counts how often it runs: under a tracing jit, that is
    how often it was traced. Hashable by identity, as jax.jit requires."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn, self.count = fn, 0
        self.__name__ = getattr(fn, "__name__", "step")
        # inspect.unwrap finds the function: JAX then names it (and its source) in its
        # cache-miss explanations, which is how the adapter tells a user jit from its own
        self.__wrapped__ = fn

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


def no_donation(name: str, donate: tuple[int, ...]) -> None:
    """For the frameworks without buffer donation: ``compile(..., donate=...)`` refused."""
    if donate:
        raise Unsupported(f"{name} has no buffer donation (JAX's donate_argnums)")


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
    if policy.mixed:
        raise Unsupported(f"{name} has no mixed precision ({policy.name}: {policy.dtype} "
                          f"weights, {policy.compute} compute)")
    if policy.gpu_only:
        raise Unsupported(f"{policy.name} applies to NVIDIA GPUs only")


@contextlib.contextmanager
def no_guard() -> Iterator[None]:
    yield


def reachable(root: Any, wanted: Callable[[Any], bool], *, depth: int = 8,
              skip: Callable[[Any], bool] = lambda obj: False) -> list[Any]:
    """Objects for which ``wanted`` holds, reachable from ``root`` through instance
    attributes, containers, closures and bound methods (breadth first, each object once).
    Modules, classes and function globals are not followed: what an implementation holds is
    in its own objects. ``skip`` prunes what need not be searched; matches are not searched
    further."""
    found, seen = [], {id(root)}
    frontier = [root]
    for _ in range(depth):
        nxt = []
        for obj in frontier:
            for ref in _referents(obj):
                if id(ref) in seen or isinstance(ref, _LEAVES):
                    continue
                seen.add(id(ref))
                if _safely(wanted, ref):
                    found.append(ref)
                elif not _safely(skip, ref):
                    nxt.append(ref)
        frontier = nxt
    return found


_LEAVES = (str, bytes, int, float, complex, bool, type, types.ModuleType, np.ndarray,
           np.generic)


def _safely(predicate: Callable[[Any], bool], obj: Any) -> bool:
    try:
        return bool(predicate(obj))
    except Exception:  # a lazy proxy or an odd object: neither wanted nor searched
        return False


def _referents(obj: Any) -> list[Any]:
    if isinstance(obj, Mapping):
        try:
            return list(obj.values())
        except Exception:
            return []
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    out: list[Any] = []
    if isinstance(obj, types.MethodType):
        out += [obj.__self__, obj.__func__]
    elif isinstance(obj, types.FunctionType):
        out += [c.cell_contents for c in obj.__closure__ or () if _filled(c)]
        out += list(obj.__defaults__ or ())
    elif isinstance(obj, functools.partial):
        out += [obj.func, *obj.args, *obj.keywords.values()]
    try:
        attributes = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        attributes = None
    if isinstance(attributes, dict):
        out += list(attributes.values())
    return out


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
        return True
    except ValueError:
        return False


def best_gflops(run: Callable[[], Any], sync: Callable[[Any], None], flops: float,
                repeats: int) -> float:
    """The fastest of ``repeats`` synchronised calls, as GFLOP/s (one untimed warm-up)."""
    sync(run())
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        sync(run())
        best = min(best, time.perf_counter() - start)
    return flops / best / 1e9
