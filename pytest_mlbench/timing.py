"""Synchronised, compile-aware timing on top of pytest-benchmark.

The first steps run (and are checked) before timing starts, so compilation never falls inside
a timed round; each timed call runs ``steps_per_call`` steps and ends with the adapter's sync,
so asynchronous frameworks are timed for finished work without a host sync per step.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_mlbench.case import Case
from pytest_mlbench.checks import assert_no_retrace


@dataclass(frozen=True)
class Result:
    """One benchmarked case, for the end-of-session table."""

    group: str
    impl: str  # "jax-jit"
    step_s: float  # median seconds per training step
    compile_s: float  # first calls of the compiled functions; 0 for eager
    gflops: float

    @classmethod
    def from_benchmark(cls, bench: Mapping[str, Any]) -> Result | None:
        """The Result of one saved pytest-benchmark entry (``stats`` nested or flat); None for
        entries that are not training steps (the control benchmark, plain benchmarks)."""
        info = bench.get("extra_info", {})
        if "framework" not in info:
            return None
        # the session's own per-step figure when recorded (data-parallel runs time it in the
        # workers), else the median round over the steps in it
        stats = bench.get("stats", bench)
        step_s = info.get("step_s") or stats["median"] / int(info.get("steps_per_call", 1) or 1)
        impl = info.get("impl") or f"{info['framework']}-{info['variant']}"
        return cls(bench.get("group") or info.get("workload", ""), impl, step_s,
                   float(info.get("compile_s", float("nan"))),
                   info.get("flops_per_step", 0) / step_s / 1e9)


def timed(step: Callable[[], Any], adapter: Any, trainer: Any) -> tuple[float, Any]:
    """Wall time of one step, synchronised on its loss and the updated parameters."""
    start = time.perf_counter()
    out = step()
    adapter.sync((out, trainer.params()))
    return time.perf_counter() - start, out


def compile_seconds(case: Case) -> float:
    """Wall time of every compiled function's first call (tracing, compilation, one dispatch),
    wherever the trainer made it: in loss_and_grads() as much as in the first step()."""
    return sum(c.first_call_s or 0.0 for c in case.compiled if c.variant != "eager")


def peak_memory(adapter: Any, trainer: Any) -> dict[str, Any]:
    """One more synchronised step, after the timed rounds, with the framework's memory counter
    on; ``None`` where the framework cannot report it on this device."""
    probe = getattr(adapter, "peak_memory", None)
    found = probe(lambda: adapter.sync((trainer.step(), trainer.params()))) if probe else None
    bytes_, scope = found if found else (None, None)
    return {"peak_memory_bytes": bytes_, "peak_memory_scope": scope}


def measure(benchmark: Any, case: Case, trainer: Any, checked_step_s: list[float], *,
            digest: str, where: str) -> Result | None:
    """Time the steady-state step; record compile time, FLOPs and GFLOP/s in extra_info."""
    cid, adapter = case.id, case.adapter
    n = cid.shape.steps_per_call

    def run_steps() -> None:
        for _ in range(n):
            out = trainer.step()
        adapter.sync((out, trainer.params()))

    steady = statistics.median(checked_step_s[1:]) if len(checked_step_s) > 1 else float("nan")
    flops = int(cid.workload.flops_per_step(cid.shape.dims))
    benchmark.group = cid.group
    benchmark.extra_info.update({
        "workload": cid.workload.name, "shape": cid.shape.label, "dims": dict(cid.shape.dims),
        "framework": cid.framework, "variant": cid.variant, "device": cid.device,
        "impl": f"{cid.framework}-{cid.variant}",
        "precision": cid.precision, "dtype": case.policy.dtype, "seed": case.seed,
        "data_sha256": digest, "steps_per_call": n, "first_call_s": checked_step_s[0],
        "checked_step_s": steady,
        "compile_s": compile_seconds(case), "flops_per_step": flops,
        "versions": adapter.versions(), "threads": adapter.threads(),
    })
    before = sum(case.traces())
    with contextlib.ExitStack() as stack:
        for compiled in case.compiled:
            stack.enter_context(compiled.guard())
        if cid.shape.rounds:
            benchmark.pedantic(run_steps, rounds=cid.shape.rounds, iterations=1)
        else:
            benchmark(run_steps)
    assert_no_retrace(sum(case.traces()), before, where=where)
    benchmark.extra_info.update(peak_memory(adapter, trainer))
    if not benchmark.enabled or not benchmark.stats:
        return None
    step_s = benchmark.stats.stats.median / n
    gflops = flops / step_s / 1e9
    benchmark.extra_info.update({"step_s": step_s, "gflops": gflops})
    return Result(cid.group, f"{cid.framework}-{cid.variant}", step_s, compile_seconds(case), gflops)
