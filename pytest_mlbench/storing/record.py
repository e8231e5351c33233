"""The one result record: a case's full identity and what was measured, versioned.

Written in one place (``Record.to_json`` into ``extra_info["mlbench"]`` of pytest-benchmark's
JSON) and read by everything downstream (gate, reports, plots) through ``Record.from_benchmark``,
which validates every field and migrates the flat extra_info of schema 1 (pytest-mlbench 0.1).
A record that cannot be trusted raises ``RecordError`` with one line saying what is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pytest_mlbench import stats
from pytest_mlbench.parallel import HOSTS, STRATEGIES, Layout

SCHEMA = 2
KINDS = ("train", "infer", "transform")
COMPILED_FROM = ("cold", "cache", "")  # Measure.compiled_from


class RecordError(ValueError):
    """A benchmark entry whose mlbench record is malformed; the message says which field."""


@dataclass(frozen=True)
class Identity:
    """What was run. Two records are comparable exactly when their ``key`` is equal."""

    workload: str
    shape: str  # the shape's label, "" when its size has one shape
    dims: Mapping[str, int]
    task: str  # "sgd", "adam", "infer", "hvp", ...
    kind: str  # "train", "infer" or "transform"
    framework: str
    variant: str
    device: str
    precision: str
    dtype: str
    workers: int = 1
    threads: int | None = None  # None: not recorded (schema 1)
    data_sha256: str = ""
    head: str = ""  # the id's leading part: workload[-shape][-task]
    strategy: str = ""  # parallel.STRATEGIES; "" single device (records before it: dp)
    nodes: int = 1  # the groups of processes the workers were launched as
    hosts: str = "local"  # "external": its workers were ones a launcher started (engine/remote)

    @property
    def key(self) -> tuple[Any, ...]:
        """The facts that must match for two measurements to be comparable."""
        return (self.workload, self.task, self.shape, tuple(sorted(self.dims.items())),
                self.framework, self.variant, self.device, self.precision, self.dtype,
                self.workers, self.strategy, self.nodes, self.threads, self.data_sha256,
                self.hosts)

    @property
    def impl(self) -> str:
        """``jax-jit``; ``torch-eager-fsdp-w2`` for a parallel case, ``...-external`` when
        its workers were started by a launcher."""
        label = Layout(self.strategy, self.workers, self.nodes).label
        return (f"{self.framework}-{self.variant}" + (f"-{label}" if label else "")
                + ("-external" if self.hosts == "external" else ""))

    @property
    def group(self) -> str:
        """Cases compared in one table: same workload, shape, task, device, precision and
        parallel layout (strategy and worker count)."""
        label = Layout(self.strategy, self.workers, self.nodes).label
        return f"{self.head or self.workload} {self.device} {self.precision}" + (
            f" {label}" if label else "")

    def differences(self, other: Identity) -> list[str]:
        """``field: self -> other`` for every identity fact that differs."""
        names = ("workload", "task", "shape", "dims", "framework", "variant", "device",
                 "precision", "dtype", "workers", "strategy", "nodes", "threads", "data_sha256",
                 "hosts")
        return [f"{n}: {getattr(self, n)!r} -> {getattr(other, n)!r}" for n in names
                if _norm(getattr(self, n)) != _norm(getattr(other, n))]

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.workload, "shape": self.shape, "dims": dict(self.dims),
                "task": self.task, "kind": self.kind, "framework": self.framework,
                "variant": self.variant, "device": self.device, "precision": self.precision,
                "dtype": self.dtype, "workers": self.workers, "strategy": self.strategy,
                "nodes": self.nodes, "threads": self.threads, "data_sha256": self.data_sha256,
                "head": self.head, **({"hosts": self.hosts} if self.hosts != "local" else {})}


def _norm(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


@dataclass(frozen=True)
class Measure:
    """Timed rounds from fresh worker processes, each round ``steps_per_call`` steps.

    ``passes[i]`` holds the seconds of every timed round of process i; ``cycles[i][j]`` says
    in which interleaving cycle round j of process i ran (rounds of different cases with the
    same pass and cycle ran back to back, which is what paired comparisons pair on)."""

    steps_per_call: int
    passes: tuple[tuple[float, ...], ...]
    cycles: tuple[tuple[int, ...], ...] = ()
    compile_s: float | None = None  # the first process's; 0 for eager
    # what compile_s came from: "cold" (compiled from nothing), "cache" (loaded from the
    # compile cache kept across runs), "" not said (eager; records from before, all cold);
    # beside one from the cache, the case's cold figure as the run that filled it measured it
    compiled_from: str = field(default="", kw_only=True)
    cold_compile_s: float | None = field(default=None, kw_only=True)
    first_call_s: float | None = None
    flops_per_step: int | None = None
    peak_gflops: float | None = None  # this session's matmul peak for the dtype
    # per process, page faults per timed step (memory the OS mapped in while the clock ran);
    # empty when not recorded (records written before it was)
    faults_per_step: tuple[float, ...] = ()
    # per process, the calls a timed round made (calibrated: rounds are recorded as the
    # seconds of steps_per_call of them) and the bare loop's seconds a step (the same built
    # step in a plain loop, one sync: runners.bare_loop); empty where not recorded
    calls_per_round: tuple[int, ...] = ()
    bare_step_s: tuple[float, ...] = ()

    @property
    def bare_s(self) -> float | None:
        """The bare loop's seconds a step, the median over processes."""
        return float(np.median(self.bare_step_s)) if self.bare_step_s else None

    @property
    def overhead(self) -> float | None:
        """The figure over the bare loop: what the harness's rounds add to a plain loop of
        the same work (1.0: nothing). Informative; the figure stays the audited rounds'."""
        bare = self.bare_s
        return None if not bare else self.step_s / bare

    def per_step(self) -> list[list[float]]:
        return [[t / self.steps_per_call for t in rounds] for rounds in self.passes]

    def estimate(self, prior: stats.Prior | None = None) -> stats.Estimate:
        """Seconds per step, with the interval the process-level spread gives, moderated by
        the run's ``prior`` (``run_prior``) when given."""
        return stats.estimate(self.per_step(), prior=prior)

    @property
    def step_s(self) -> float:
        return stats.center(self.per_step())

    @property
    def gflops(self) -> float | None:
        return None if not self.flops_per_step else self.flops_per_step / self.step_s / 1e9

    @property
    def utilisation(self) -> float | None:
        """Achieved GFLOP/s as a fraction of the session's matmul peak for the dtype."""
        if self.gflops is None or not self.peak_gflops:
            return None
        return self.gflops / self.peak_gflops

    def to_json(self) -> dict[str, Any]:
        est = self.estimate()
        return {"steps_per_call": self.steps_per_call,
                "passes": [list(p) for p in self.passes],
                "cycles": [list(c) for c in self.cycles],
                "compile_s": self.compile_s, "first_call_s": self.first_call_s,
                "compiled_from": self.compiled_from, "cold_compile_s": self.cold_compile_s,
                "flops_per_step": self.flops_per_step, "peak_gflops": self.peak_gflops,
                "faults_per_step": list(self.faults_per_step),
                "calls_per_round": list(self.calls_per_round),
                "bare_step_s": list(self.bare_step_s),
                "bare_s": self.bare_s, "overhead": self.overhead,
                # derived, for readers that do not recompute: seconds per step, and the
                # interval this case's own processes give (the tables take what the run's
                # other figures say too, which no single record knows: run_prior)
                "step_s": est.value, "interval_s": [est.low, est.high],
                "interval_level": stats.PREDICTION,
                "gflops": self.gflops, "utilisation": self.utilisation,
                "estimate": est.to_dict()}


def run_prior(measures: Iterable[Measure | None]) -> stats.Prior | None:
    """A run's prior on the spread of its figures' process medians (stats.Prior.of_figures),
    which its absolute figures' intervals share (Measure.estimate; None below
    stats.PRIOR_MIN figures of two processes or more)."""
    return stats.Prior.of_figures(m.per_step() for m in measures if m is not None)


@dataclass(frozen=True)
class Record:
    identity: Identity
    name: str  # the test id's parameter: mlp-jax-jit-cpu-fp32
    measure: Measure | None = None  # None when nothing was timed (--benchmark-disable)
    checks: Mapping[str, Any] = field(default_factory=dict)
    environment: Mapping[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA

    def with_measure(self, measure: Measure) -> Record:
        return replace(self, measure=measure)

    def to_json(self) -> dict[str, Any]:
        return {"schema": self.schema, "name": self.name, "identity": self.identity.to_json(),
                "measure": self.measure.to_json() if self.measure else None,
                "checks": dict(self.checks), "environment": dict(self.environment)}

    @classmethod
    def from_json(cls, data: Any) -> Record:
        if not isinstance(data, Mapping):
            raise RecordError("extra_info['mlbench'] is not an object")
        schema = data.get("schema")
        if schema != SCHEMA:
            raise RecordError(f"record schema {schema!r} is not {SCHEMA}: written by another "
                              "version of pytest-mlbench")
        ident = _identity(_mapping(data, "identity"))
        measure = None if data.get("measure") is None else _compiled(
            _measure(_mapping(data, "measure")), _mapping(data, "measure"))
        return cls(ident, _text(data, "name"), measure, _mapping(data, "checks", {}),
                   _mapping(data, "environment", {}))

    @classmethod
    def from_benchmark(cls, bench: Any) -> Record | None:
        """The record of one pytest-benchmark entry; None for entries that are no mlbench case
        (the control benchmark, a plain pytest-benchmark test). Schema 1 entries (flat
        extra_info with ``framework``) are migrated."""
        if not isinstance(bench, Mapping):
            raise RecordError("benchmark entry is not an object")
        info = bench.get("extra_info")
        if info is None:
            info = {}
        if not isinstance(info, Mapping):
            raise RecordError("extra_info is not an object")
        if "mlbench" in info:
            return cls.from_json(info["mlbench"])
        if "framework" in info:
            return migrate_v1(bench, info)
        return None


# -- validation of loaded JSON: one line per problem ------------------------------------------

def _mapping(data: Mapping[str, Any], key: str, default: Any = None) -> Mapping[str, Any]:
    value = data.get(key, default)
    if not isinstance(value, Mapping):
        raise RecordError(f"{key!r} is not an object")
    return value


def _text(data: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise RecordError(f"{key!r} is not a string (got {type(value).__name__})")
    return value


def _count(data: Mapping[str, Any], key: str, default: Any = None, *, optional: bool = False,
           ) -> int | None:
    value = data.get(key, default)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RecordError(f"{key!r} must be a positive integer (got {value!r})")
    return value


def all_seconds(values: Sequence[Any]) -> bool:
    """Every value a float, finite and above zero, with no element through Python code: a
    long run holds millions of rounds (checked as an array), a history thousands of short
    lists (where an array's cost per call would be most of a load; ``0 < t < inf`` is false
    for NaN)."""
    if not set(map(type, values)) <= {float}:
        return False
    if len(values) > 256:
        arr = np.asarray(values, dtype=np.float64)
        return bool(np.isfinite(arr).all() and (arr > 0).all())
    return all(map((0.0).__lt__, values)) and all(map(math.inf.__gt__, values))


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value <= 0:
        raise RecordError(f"{what} must be positive finite seconds (got {value!r})")
    return float(value)


def _optional_number(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0:
        raise RecordError(f"{key!r} must be a non-negative finite number (got {value!r})")
    return float(value)


def _dims(value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
            for k, v in value.items()):
        raise RecordError(f"'dims' must map names to integers (got {value!r})")
    return dict(value)


def _identity(data: Mapping[str, Any]) -> Identity:
    kind = _text(data, "kind")
    if kind not in KINDS:
        raise RecordError(f"'kind' {kind!r} is not one of {', '.join(KINDS)}")
    workers = int(_count(data, "workers", 1) or 1)
    strategy = _text(data, "strategy", "dp" if workers > 1 else "")
    if strategy not in ("", *STRATEGIES) or bool(strategy) != (workers > 1):
        raise RecordError(f"'strategy' {strategy!r} with {workers} worker(s): expected one of "
                          f"{', '.join(STRATEGIES)} above one worker, \"\" at one")
    return Identity(
        workload=_text(data, "workload"), shape=_text(data, "shape", ""),
        dims=_dims(data.get("dims")), task=_text(data, "task"), kind=kind,
        framework=_text(data, "framework"), variant=_text(data, "variant"),
        device=_text(data, "device"), precision=_text(data, "precision"),
        dtype=_text(data, "dtype"), workers=workers, strategy=strategy,
        nodes=int(_count(data, "nodes", 1) or 1), hosts=_hosts(data),
        threads=_count(data, "threads", None, optional=True),
        data_sha256=_text(data, "data_sha256", ""), head=_text(data, "head", ""))


def _hosts(data: Mapping[str, Any]) -> str:
    hosts = _text(data, "hosts", "local")
    if hosts not in HOSTS:
        raise RecordError(f"'hosts' {hosts!r}: expected one of {', '.join(HOSTS)}")
    return hosts


def _rounds(value: Any, what: str) -> tuple[float, ...]:
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise RecordError(f"{what} is not a list of rounds")
    if all_seconds(value):  # the usual case, at C speed
        return tuple(value)
    return tuple(_seconds(t, f"{what} round {i}") for i, t in enumerate(value))


def _cycles(value: Any) -> tuple[tuple[int, ...], ...]:
    """Per process, the interleaving cycle of each round: lists of non-negative integers."""
    def ok(cyc: Any) -> bool:
        return isinstance(cyc, list) and all(
            isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cyc)

    if not isinstance(value, list) or not all(ok(cyc) for cyc in value):
        raise RecordError("'cycles' must list, per process, non-negative integers")
    return tuple(tuple(cyc) for cyc in value)


def _measure(data: Mapping[str, Any]) -> Measure:
    passes = data.get("passes")
    if not isinstance(passes, Sequence) or isinstance(passes, str) or not passes:
        raise RecordError("'passes' must be a non-empty list of per-process rounds")
    rounds = tuple(_rounds(p, f"process {i}") for i, p in enumerate(passes))
    if not any(rounds):
        raise RecordError("'passes' holds no timed round")
    cycles = _cycles(data.get("cycles") or [])
    if cycles and [len(c) for c in cycles] != [len(r) for r in rounds]:
        raise RecordError("'cycles' does not match 'passes' round for round")
    flops = data.get("flops_per_step")
    if flops is not None and (isinstance(flops, bool) or not isinstance(flops, int) or flops < 0):
        raise RecordError(f"'flops_per_step' must be a non-negative integer (got {flops!r})")
    faults = data.get("faults_per_step", [])  # absent: a record from before they were counted
    if not isinstance(faults, list) or len(faults) not in (0, len(rounds)) or not all(
            isinstance(f, int | float) and not isinstance(f, bool) and math.isfinite(f)
            and f >= 0 for f in faults):
        raise RecordError("'faults_per_step' must list, per process, a non-negative number")
    calls = data.get("calls_per_round", [])  # absent: a record from before calibration
    if not isinstance(calls, list) or not all(
            isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in calls):
        raise RecordError("'calls_per_round' must list, per process, a positive integer")
    bare = data.get("bare_step_s", [])  # absent: a record from before the bare loop
    if not isinstance(bare, list) or not all(
            isinstance(b, int | float) and not isinstance(b, bool) and math.isfinite(b)
            and b > 0 for b in bare):
        raise RecordError("'bare_step_s' must list, per process, a positive number of seconds")
    return Measure(int(_count(data, "steps_per_call") or 1), rounds, cycles,
                   _optional_number(data, "compile_s"), _optional_number(data, "first_call_s"),
                   flops, _optional_number(data, "peak_gflops"),
                   tuple(float(f) for f in faults), tuple(int(c) for c in calls),
                   tuple(float(b) for b in bare))


def _compiled(measure: Measure, data: Mapping[str, Any]) -> Measure:
    """What the compile figure came from; absent in records from before the compile cache
    was kept across runs (their figures were cold)."""
    source = data.get("compiled_from", "")
    if source not in COMPILED_FROM:
        raise RecordError(f"'compiled_from' must be one of {', '.join(map(repr, COMPILED_FROM))}"
                          f" (got {source!r})")
    return replace(measure, compiled_from=source,
                   cold_compile_s=_optional_number(data, "cold_compile_s"))


def migrate_v1(bench: Mapping[str, Any], info: Mapping[str, Any]) -> Record:
    """A pytest-mlbench 0.1 entry (flat extra_info, rounds in ``stats.data``) as a record.
    Its threads were not recorded (None), so it only compares with other 0.1 entries."""
    stats_ = bench.get("stats")
    if not isinstance(stats_, Mapping):
        raise RecordError("'stats' is not an object")
    found = info.get("workers", 1)
    workers = found if isinstance(found, int) and not isinstance(found, bool) else 1
    variant = _text(info, "variant", "") or str(info.get("backend", ""))
    shape = _text(info, "shape", "")
    workload = _text(info, "workload")
    ident = Identity(
        workload=workload, shape=shape, dims=_dims(info.get("dims", {})), task="sgd",
        kind="train", framework=_text(info, "framework"), variant=variant,
        device=_text(info, "device", "cpu"), precision=_text(info, "precision"),
        dtype=_text(info, "dtype", "float32" if info.get("precision") == "fp32" else ""),
        workers=workers, strategy="dp" if workers > 1 else "", threads=None,
        data_sha256=_text(info, "data_sha256", ""),
        head=f"{workload}-{shape}" if shape else workload)
    data = stats_.get("data")
    measure = None
    if data:
        measure = Measure(int(_count(info, "steps_per_call", 1) or 1),
                          (_rounds(data, "stats.data"),), (),
                          _optional_number(info, "compile_s"),
                          _optional_number(info, "first_call_s"),
                          info.get("flops_per_step") if isinstance(info.get("flops_per_step"), int)
                          else None)
    name = bench.get("param") if isinstance(bench.get("param"), str) else bench.get("name", "")
    return Record(ident, str(name), measure, {"migrated_from_schema": 1}, {}, SCHEMA)
