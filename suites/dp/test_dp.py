"""Data-parallel training steps on the frameworks' own engines: JAX sharding over a device
Mesh and PyTorch DistributedDataParallel, for each worker count in --mlbench-workers.

A workload takes part when this folder has ``<workload>_<framework>.py`` defining
``make_loss(dims)`` (see pytest_mlbench/distributed/losses.py). There is deliberately no
spec.py here: the catalogue would take the folder for a single-device workload.
Multi-GPU use: docs/DISTRIBUTED.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_mlbench import catalogue
from pytest_mlbench.distributed import losses, runner
from pytest_mlbench.plugin import RESULTS, SETTINGS

HERE = Path(__file__).resolve().parent


def _cases(config: pytest.Config) -> list[Any]:
    settings = config.stash[SETTINGS]
    suites = config.rootpath / str(config.getini("mlbench_suites"))
    names = sorted({n for fw in runner.FRAMEWORKS for n in losses.available(HERE, fw)})
    try:
        workloads = [catalogue.load_workload(suites / name) for name in names]
    except catalogue.CatalogueError as exc:
        pytest.fail(str(exc), pytrace=False)
    cases = runner.enumerate_cases(workloads, settings.size, settings.frameworks,
                                   settings.workers, settings.device, settings.precisions)
    return [pytest.param(c, id=c.name) for c in cases
            if losses.loss_file(HERE, c.workload.name, c.framework).is_file()]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "dp_case" in metafunc.fixturenames:
        cases = _cases(metafunc.config)
        if not cases:  # say why, rather than pytest's "got empty parameter set"
            engines = ", ".join(runner.FRAMEWORKS)
            cases = [pytest.param(None, id="none", marks=pytest.mark.skip(
                reason=f"no data-parallel engine among the selected frameworks ({engines})"))]
        metafunc.parametrize("dp_case", cases)


@pytest.fixture(scope="module")
def dp_baselines() -> dict[tuple[str, ...], float]:
    """1-worker step times of this run, for the scaling efficiency of the larger counts."""
    return {}


def test_dp_step(dp_case: runner.DPCase, benchmark: Any, request: pytest.FixtureRequest,
                 dp_baselines: dict[tuple[str, ...], float]) -> None:
    """Checked against the float64 single-device step on the same global batch, then timed."""
    reason = runner.unavailable_reason(dp_case)
    if reason:
        pytest.skip(reason)
    config = request.config
    runner.run_dp_case(dp_case, benchmark, HERE, config.stash[SETTINGS].seed, dp_baselines,
                       config.stash[RESULTS])
