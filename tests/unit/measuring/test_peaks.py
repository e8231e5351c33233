"""The session's matmul peak is measured and recorded at a case's compute dtype (amp's
bfloat16, not its float32 storage: against float32's peak a fast amp case failed as
implausible), on matrices a GPU is not launch-bound on."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pytest_mlbench.engine import protocol as p
from pytest_mlbench.engine.framework_worker import PEAK_N, PEAK_N_GPU, FrameworkWorker
from pytest_mlbench.measuring.outcome import CaseState, outcome_of
from pytest_mlbench.measuring.plan import Lane, Side
from pytest_mlbench.workloads import catalogue
from pytest_mlbench.workloads.case import CaseId
from tests.unit.measuring.test_outcome import PLAN, SUITES, _facts

PEAKS = {"float32": 100.0, "bfloat16": 400.0}


def recorded_peak(precision: str, peaks: dict[str, float]) -> Any:
    workload = catalogue.load_workload(SUITES / "mlp")
    cid = CaseId(workload, workload.sizes["smoke"][0], workload.all_tasks[0], "torch",
                 "eager", "cpu", precision)
    state = CaseState(cid, Lane(Side(), catalogue.Catalogue(SUITES, (workload,)), (cid,)))
    state.add(_facts(True, [0.1, 0.2], [0, 1]))
    record = outcome_of(state, PLAN, peaks).record
    assert record is not None and record.measure is not None
    return record.measure.peak_gflops


def test_a_mixed_cases_peak_is_its_compute_dtypes() -> None:
    assert recorded_peak("amp", PEAKS) == 400.0 and recorded_peak("fp32", PEAKS) == 100.0
    # a session that measured float32 alone has no peak for an amp case: none, not float32's
    assert recorded_peak("amp", {"float32": 100.0}) is None


def test_a_gpu_workers_peak_is_an_8192_matmul() -> None:
    sizes: list[int] = []
    adapter = SimpleNamespace(matmul_gflops=lambda dtype, n, repeats: sizes.append(n) or 1.0)
    for device in ("gpu", "cpu"):
        worker = SimpleNamespace(adapter=adapter,
                                 cases={0: SimpleNamespace(spec=SimpleNamespace(device=device))})
        FrameworkWorker.peak(worker, p.Peak("bfloat16"))  # type: ignore[arg-type]
    assert sizes == [PEAK_N_GPU, PEAK_N["bfloat16"]] == [8192, 1024]
