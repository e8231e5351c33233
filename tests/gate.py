"""The checks before timing, in this process, on a real suite's implementation: a CaseServer
(what a framework worker runs for one case) builds it from its folder, and checking/phases.py checks
what it reports, as measuring/case_run.py does across the process boundary. For tests that break an
implementation with monkeypatch, which a worker process would not see."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import frameworks
from pytest_mlbench.checking import phases
from pytest_mlbench.checking.asserts import tolerances
from pytest_mlbench.checking.oracle_client import OracleService
from pytest_mlbench.checking.reference import Reference
from pytest_mlbench.engine.protocol import CaseSpec, Gradient
from pytest_mlbench.engine.server import CaseServer
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads import catalogue, data
from pytest_mlbench.workloads.case import CaseId

SUITES = Path(__file__).resolve().parents[1] / "suites"


def check(workload_name: str, framework: str, variant: str = "eager",
          precision: str = "fp32", root: Path = SUITES, seed: int = 0) -> None:
    """Build the smoke case and run start, gradient and checked-step checks; AssertionError
    with the checks' message when the implementation is wrong."""
    workload = catalogue.load_workload(root / workload_name)
    shape, task = workload.sizes["smoke"][0], workload.all_tasks[0]
    cid = CaseId(workload, shape, task, framework, variant, "cpu", precision)
    policy = POLICIES[precision]
    adapter = frameworks.load(framework, frameworks.BUILTIN)
    server = CaseServer(adapter, CaseSpec.of(cid, str(root), "smoke", seed))
    inputs, params = data.seeded_start(workload, shape, seed, policy)
    oracle = OracleService()
    try:
        reference = Reference(workload, shape, seed, str(root / workload_name), oracle)
        ctx = phases.Context(cid, reference, policy, tolerances(precision, workload.tolerances),
                             inputs, params, f"{framework} {variant} ({cid.name})")
        phases.check_start(ctx, server.start())
        found = server.evaluate(0)
        assert isinstance(found, Gradient), f"{cid.name}: a training step evaluates to a gradient"
        phases.check_gradient(ctx, found)
        first = server.steps(1)
        rest = server.steps(workload.check_steps - 1) if workload.check_steps > 1 else None
        phases.check_steps(ctx, first, rest)
    finally:
        oracle.close()
