"""Synthetic Records and pytest-benchmark runs for the gate, report and storage tests.

Nothing here is timed: every round is made up, so no assertion depends on how fast the machine
is. Rounds are log-normal around a chosen median, with a small offset per process (variance
lives between processes) and a smaller spread within each."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench.storing.record import Identity, Measure, Record

MACHINE: dict[str, Any] = {
    "cpu": {"model": "Test CPU", "arch": "X86_64", "simd_flags": ["avx2"], "logical_cores": 2,
            "usable_cores": 2},
    "blas": {"name": "openblas", "version": "0.3", "threads": 2},
    "threadpools": [{"user_api": "blas", "internal_api": "openblas", "version": "0.3",
                     "num_threads": 2, "threading_layer": "pthreads", "architecture": "Haswell"}],
    "threads": {}, "packages": {}, "gpus": []}


def identity(impl: str = "jax-jit", **changes: Any) -> Identity:
    framework, variant = impl.split("-", 1)
    base = Identity(workload="mlp", shape="", dims={"batch": 64, "d": 32}, task="sgd",
                    kind="train", framework=framework, variant=variant, device="cpu",
                    precision="fp32", dtype="float32", workers=1, threads=2,
                    data_sha256="0f" * 8, head="mlp")
    return replace(base, **changes)


def measure(median: float, *, processes: int = 5, rounds: int = 20, seed: int = 0,
            steps: int = 1, between: float = 0.01, within: float = 0.03,
            **extra: Any) -> Measure:
    """Seconds per *call* (``steps`` steps) around ``median`` per step."""
    rng = np.random.default_rng(seed)
    passes = []
    for _ in range(processes):
        offset = np.exp(between * rng.standard_normal())
        passes.append(tuple(float(t) for t in
                            median * steps * offset * np.exp(within * rng.standard_normal(rounds))))
    return Measure(steps_per_call=steps, passes=tuple(passes), **extra)


def record(impl: str = "jax-jit", median: float | None = 1e-3, *, name: str | None = None,
           measure_kw: Mapping[str, Any] | None = None, **changes: Any) -> Record:
    ident = identity(impl, **changes)
    m = None if median is None else measure(median, **(measure_kw or {}))
    return Record(ident, name or f"{ident.head}-{impl}-cpu-fp32", m)


def bench(rec: Record | None, fullname: str | None = None, **extra_info: Any) -> dict[str, Any]:
    """One pytest-benchmark entry holding ``rec`` as extra_info["mlbench"]."""
    fullname = fullname or f"suites/test_workloads.py::test_case[{rec.name if rec else 'x'}]"
    data = [t for p in rec.measure.passes for t in p] if rec and rec.measure else [1e-3, 2e-3]
    stats = {"min": min(data), "max": max(data), "mean": float(np.mean(data)),
             "median": float(np.median(data)), "stddev": float(np.std(data)),
             "rounds": len(data), "iterations": 1, "data": data}
    info = dict(extra_info)
    if rec is not None:
        info["mlbench"] = rec.to_json()
    return {"group": None, "name": fullname.split("::")[-1], "fullname": fullname,
            "params": None, "param": None, "extra_info": info, "options": {}, "stats": stats}


def run_json(*benches: dict[str, Any], machine: Mapping[str, Any] | None = None,
             partial: bool | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "machine_info": {"python_version": "3.11.0", "mlbench": dict(machine or MACHINE)},
        "commit_info": {}, "benchmarks": list(benches),
        "datetime": "2025-01-01T00:00:00+00:00", "version": "5.3.1"}
    if partial is not None:
        out["mlbench"] = {"partial": partial}
    return out


def write(path: Path, run: Mapping[str, Any]) -> Path:
    path.write_text(json.dumps(run))
    return path


# -- pytester sessions --------------------------------------------------------------------------

#: A test module whose benchmarks carry the Records of records.json beside it: the gate and the
#: save read those, so verdicts are fixed by the test, never by the machine's speed.
BENCH_MODULE = """
import json, pathlib, pytest

RECORDS = json.loads((pathlib.Path(__file__).parent / "records.json").read_text())

@pytest.mark.parametrize("case", sorted(RECORDS))
def test_case(benchmark, case):
    benchmark.extra_info["mlbench"] = RECORDS[case]
    benchmark.pedantic(lambda: None, rounds=3, iterations=1)
"""

#: Run the sessions without the installed plugin's engine (being rewritten): see session_plugin.
PLUGIN_ARGS = ("-p", "no:mlbench", "-p", "tests.session_plugin", "-p", "no:cacheprovider")


def session_files(directory: Path, *records: Record) -> None:
    """test_cases.py and its records.json, ids ``test_case[<record name>]``."""
    (directory / "records.json").write_text(json.dumps({r.name: r.to_json() for r in records}))
    (directory / "test_cases.py").write_text(BENCH_MODULE)


def fullname(rec: Record) -> str:
    return f"test_cases.py::test_case[{rec.name}]"


def toy_spec(sizes: str, implementations: str, more: str = "") -> str:
    """spec.py of a toy least-squares workload (three columns, learning rate 0.1) for the
    session tests' own suites folders: ``sizes``, ``implementations`` and ``more`` (further
    Workload arguments) as Python source."""
    return f'''
import numpy as np
from pytest_mlbench import Shape, Workload

def loss(p, d):
    r = d["x"] @ p["w"] - d["y"]
    return 0.5 * np.mean(r * r)

def grad(p, d):
    r = d["x"] @ p["w"] - d["y"]
    return {{"w": d["x"].T @ r / len(r)}}

SPEC = Workload(
    name="toy", summary="least squares", learning_rate=0.1,
    sizes={sizes},
    make_data=lambda rng, d: {{"x": rng.standard_normal((d["n"], 3)),
                              "y": rng.standard_normal((d["n"], 1))}},
    make_params=lambda rng, d: {{"w": rng.standard_normal((3, 1))}},
    loss=loss, grad=grad, flops_per_step=lambda d: 4 * d["n"] * 3,
    implementations={implementations},{more}
)
'''
