"""Parent side of a data-parallel benchmark: cases, worker pools, the correctness gate against
the float64 single-device reference, and timing through pytest-benchmark.

Timing. pytest-benchmark only reports what it times itself, so the parent benchmarks a
function that asks the long-lived workers for one round of ``steps`` steps and waits for the
replies; its statistics therefore include one pipe round trip per round. That overhead is
measured (``ipc_roundtrip_s``, a no-op command) and amortised over the steps of a round. The
workers also time each round themselves (aligned start, synchronised end; a global step is
over when the slowest rank is): ``step_s``, ``samples_per_s`` and ``scaling_efficiency`` in
extra_info come from those worker-side times, which contain no harness overhead.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import data
from pytest_mlbench.checks import TOLERANCES, assert_identical, assert_trajectory_close
from pytest_mlbench.distributed.launcher import Pool, WorkerSpec, free_loopback_port
from pytest_mlbench.distributed.losses import loss_file
from pytest_mlbench.errors import Unavailable, Unsupported
from pytest_mlbench.harness import assert_moved_like_reference, seeded_start
from pytest_mlbench.precision import POLICIES, numpy_dtype
from pytest_mlbench.timing import Result
from pytest_mlbench.workload import Arrays, Shape, Workload

FRAMEWORKS = ("jax", "torch")
ENGINES = {"jax": "pytest_mlbench.distributed.jax_dp:build",
           "torch": "pytest_mlbench.distributed.torch_dp:build"}
BACKENDS = {("jax", "cpu"): "xla", ("jax", "gpu"): "xla", ("torch", "cpu"): "gloo",
            ("torch", "gpu"): "nccl"}
PRECISIONS = ("fp32",)
ROUNDS = 10  # timed rounds when the shape does not fix them
MIN_STEPS = 10  # steps per round at least, so one pipe round trip is a small share
START_TIMEOUT_S = 180.0  # spawn + import torch/jax + rendezvous on a loaded 2-core machine
CALL_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class DPCase:
    workload: Workload
    shape: Shape
    framework: str
    workers: int
    device: str
    precision: str

    @property
    def backend(self) -> str:
        return BACKENDS.get((self.framework, self.device), "none")

    @property
    def head(self) -> str:
        w = self.workload.name
        return f"{w}-{self.shape.label}" if self.shape.label else w

    @property
    def name(self) -> str:
        """``mlp-torch-gloo-w2-cpu-fp32``."""
        return (f"{self.head}-{self.framework}-{self.backend}-w{self.workers}-{self.device}-"
                f"{self.precision}")

    @property
    def group(self) -> str:
        return f"{self.head} data-parallel {self.device} {self.precision}"

    @property
    def baseline_key(self) -> tuple[str, ...]:
        """Cases sharing this key differ only in worker count (efficiency is relative to w1)."""
        return (self.head, self.framework, self.backend, self.device, self.precision)


def enumerate_cases(workloads: Iterable[Workload], size: str, frameworks: Iterable[str],
                    workers: Iterable[int], device: str,
                    precisions: Iterable[str]) -> list[DPCase]:
    """Every workload whose single-device implementation exists in a DP-capable framework."""
    dev = "cpu" if device == "auto" else device  # several GPUs are asked for explicitly
    fws = [fw for fw in frameworks if fw in FRAMEWORKS]
    return [DPCase(w, shape, fw, n, dev, prec) for w in workloads for shape in w.sizes[size]
            for fw in fws if fw in w.implementations for n in workers for prec in precisions]


def unavailable_reason(case: DPCase) -> str | None:
    """Why this case cannot run here (skip), or None."""
    if case.precision not in PRECISIONS:
        return f"data-parallel cases run in {', '.join(PRECISIONS)} only so far"
    if (case.framework, case.device) not in BACKENDS:
        return f"no data-parallel backend for {case.framework} on {case.device}"
    batch = case.shape.dims.get("batch", 0)
    if batch % case.workers:
        return f"global batch {batch} does not split into {case.workers} equal shards"
    if case.device == "gpu":
        return _gpu_reason(case)
    return None


def _gpu_reason(case: DPCase) -> str | None:
    if case.framework == "torch":
        import torch

        found = torch.cuda.device_count()
    else:
        import jax

        try:
            found = len(jax.devices("gpu"))
        except RuntimeError:
            found = 0
    return None if found >= case.workers else f"{case.workers} GPUs needed, {found} visible"


def cpu_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def worker_spec(case: DPCase, losses: Path, inputs: Arrays, params: Arrays, seed: int,
                reduction: str) -> WorkerSpec:
    """JAX: one process owning N devices. torch: N processes, one rank (and GPU) each.
    ``losses`` is the folder of ``<workload>_<framework>.py`` loss files (see losses.py)."""
    config: dict[str, Any] = {
        "loss_path": str(loss_file(losses, case.workload.name, case.framework)),
        "dims": dict(case.shape.dims), "inputs": inputs, "params": params, "batch": case.shape.dims["batch"],
        "learning_rate": case.workload.learning_rate, "reduction": reduction, "seed": seed,
        "device": case.device, "workers": case.workers, "backend": case.backend,
    }
    if case.framework == "jax":
        return WorkerSpec(ENGINES["jax"], 1, config, _jax_env(case))
    config.update(init_method=f"tcp://127.0.0.1:{free_loopback_port()}",
                  threads=max(1, cpu_cores() // case.workers),  # share the cores, not multiply
                  collective_timeout_s=CALL_TIMEOUT_S)
    env = {"GLOO_SOCKET_IFNAME": "lo"} if case.device == "cpu" else {}  # loopback only
    return WorkerSpec(ENGINES["torch"], case.workers, config, env)


def _jax_env(case: DPCase) -> dict[str, str]:
    if case.device != "cpu":
        return {}
    flags = os.environ.get("XLA_FLAGS", "")
    flag = f"--xla_force_host_platform_device_count={case.workers}"
    return {"XLA_FLAGS": f"{flags} {flag}".strip(), "JAX_PLATFORMS": "cpu"}


def start_pool(case: DPCase, spec: WorkerSpec, *, start_timeout: float = START_TIMEOUT_S,
               timeout: float = CALL_TIMEOUT_S) -> Pool:
    context = None
    if case.framework == "torch":
        import torch.multiprocessing as tmp  # spawn, with torch's tensor pickling registered

        context = tmp.get_context("spawn")
    return Pool(spec, context=context, start_timeout=start_timeout, timeout=timeout)


def check_dp(pool: Pool, case: DPCase, inputs: Arrays, params: Arrays) -> list[float]:
    """Every rank starts from the seeded bytes; after one and after ``check_steps`` steps the
    ranks agree bit for bit and their parameters moved as the float64 single-device step on
    the global batch moves them. Returns the slowest rank's wall time of each checked step."""
    workload, policy = case.workload, POLICIES[case.precision]
    tol = TOLERANCES[policy.name].trajectory
    for rank, got in enumerate(pool.call("params")):
        assert_identical(got, params, where=f"{case.name} rank {rank} initial params")
    ref_losses, _ = workload.reference_trajectory(params, inputs, workload.check_steps,
                                                  numpy_dtype(policy))
    losses, times, done = [], [], 0
    for steps in (s for s in (1, workload.check_steps - 1) if s > 0):
        replies = pool.call("steps", steps)
        # equal shards: the global mean loss is the mean of the ranks' shard means
        losses += list(np.mean([r["losses"] for r in replies], axis=0))
        times += list(np.max([r["times"] for r in replies], axis=0))
        done += steps
        current = _agreed_params(pool.call("params"), case)
        assert_moved_like_reference(current, params, inputs, workload, policy, done,
                                    where=f"{case.name} vs single-device after {done} step(s)")
    assert_trajectory_close(losses, ref_losses, rtol=tol.rtol, atol=tol.atol,
                            where=f"{case.name} trajectory")
    return times


def _agreed_params(per_rank: list[Arrays], case: DPCase) -> Arrays:
    """Replicas must stay identical: a rank that drifted means a broken reduction."""
    for rank, got in enumerate(per_rank[1:], start=1):
        assert_identical(got, per_rank[0], where=f"{case.name} rank {rank} vs rank 0 params")
    return per_rank[0]


def median_roundtrip(pool: Pool, n: int = 20) -> float:
    """Parent -> all workers -> parent for a no-op: the harness overhead in each timed round."""
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        pool.call("ping")
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def measure_dp(benchmark: Any, pool: Pool, case: DPCase, checked: list[float], *, digest: str,
               baselines: MutableMapping[tuple[str, ...], float]) -> Result | None:
    """Time rounds of ``steps`` global steps; worker-side figures go to extra_info."""
    steps = max(case.shape.steps_per_call, MIN_STEPS)
    rounds = case.shape.rounds or ROUNDS
    worker_s: list[float] = []

    def one_round() -> None:
        worker_s.append(max(pool.call("time", steps)))  # the slowest rank ends the step

    info = pool.call("info")[0]
    traces_before = pool.call("traces")
    benchmark.group = case.group
    benchmark.extra_info.update(_static_info(case, info, checked, digest, steps))
    benchmark.extra_info["ipc_roundtrip_s"] = median_roundtrip(pool)
    benchmark.pedantic(one_round, rounds=rounds, iterations=1, warmup_rounds=1)
    if pool.call("traces") != traces_before:
        raise AssertionError(f"{case.name}: the step was traced again while timed; compile "
                             "time leaked into the measurement")
    if not benchmark.enabled or not benchmark.stats:
        return None
    step_s = statistics.median(worker_s[-rounds:]) / steps
    benchmark.extra_info.update(_throughput(case, step_s, baselines))
    benchmark.extra_info["parent_step_s"] = benchmark.stats.stats.median / steps
    gflops = case.workload.flops_per_step(case.shape.dims) / step_s / 1e9
    return Result(case.group, benchmark.extra_info["impl"], step_s,
                  benchmark.extra_info["compile_s"], gflops)


def _static_info(case: DPCase, info: Mapping[str, Any], checked: list[float], digest: str,
                 steps: int) -> dict[str, Any]:
    batch = int(case.shape.dims["batch"])
    steady = statistics.median(checked[1:]) if len(checked) > 1 else float("nan")
    cores = cpu_cores()
    return {
        "workload": case.workload.name, "shape": case.shape.label,
        "dims": dict(case.shape.dims), "framework": case.framework, "backend": case.backend,
        "workers": case.workers, "device": case.device, "precision": case.precision,
        "global_batch": batch, "batch_per_worker": batch // case.workers,
        "impl": f"{case.framework}-{case.backend}-w{case.workers}",
        "flops_per_step": int(case.workload.flops_per_step(case.shape.dims)),
        "steps_per_call": steps, "data_sha256": digest, "first_call_s": checked[0],
        "compile_s": max(checked[0] - steady, 0.0), "engine": dict(info), "cpu_cores": cores,
        "oversubscribed": case.device == "cpu" and case.workers > cores,
    }


def _throughput(case: DPCase, step_s: float,
                baselines: MutableMapping[tuple[str, ...], float]) -> dict[str, Any]:
    """Strong scaling (fixed global batch): efficiency = t(1 worker) / (N * t(N workers))."""
    if case.workers == 1:
        baselines[case.baseline_key] = step_s
    base = baselines.get(case.baseline_key)
    out: dict[str, Any] = {"step_s": step_s,
                           "samples_per_s": case.shape.dims["batch"] / step_s,
                           "scaling_efficiency": None}
    if base is None:
        out["scaling_note"] = "no 1-worker run of this case in this session"
    else:
        out["speedup"] = base / step_s
        out["scaling_efficiency"] = base / (case.workers * step_s)
    return out


def prepare(case: DPCase, seed: int) -> tuple[Arrays, Arrays]:
    """The same seeded bytes as the single-device case of this workload and shape."""
    reason = unavailable_reason(case)
    if reason:
        raise Unsupported(reason) if case.device == "cpu" else Unavailable(reason)
    return seeded_start(case.workload, case.shape, seed, POLICIES[case.precision])


def run_dp_case(case: DPCase, benchmark: Any, losses: Path, seed: int,
                baselines: MutableMapping[tuple[str, ...], float],
                results: list[Result] | None = None) -> None:
    """Seeded start -> worker pool -> correctness gate -> timed rounds; pool always closed."""
    inputs, params = prepare(case, seed)
    spec = worker_spec(case, losses, inputs, params, seed, reduction="mean")
    with start_pool(case, spec) as pool:
        checked = check_dp(pool, case, inputs, params)
        result = measure_dp(benchmark, pool, case, checked,
                            digest=data.digest(inputs, params), baselines=baselines)
    if result is not None and results is not None:
        results.append(result)
