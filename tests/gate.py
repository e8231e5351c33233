"""The checks before timing, in this process, on a real suite's implementation: a CaseServer
(what a framework worker runs for one case) builds it from its folder, and verify.py checks
what it reports, as pipeline.py does across the process boundary. For tests that break an
implementation with monkeypatch, which a worker process would not see."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import catalogue, data, frameworks, verify
from pytest_mlbench.case import CaseId
from pytest_mlbench.checks import tolerances
from pytest_mlbench.engine.server import CaseServer
from pytest_mlbench.oracle import OracleService
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.reference import Reference

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
    server = CaseServer(adapter, cid.spec(str(root), "smoke", seed))
    inputs, params = data.seeded_start(workload, shape, seed, policy)
    oracle = OracleService()
    try:
        reference = Reference(workload, shape, seed, str(root / workload_name), oracle)
        ctx = verify.Context(cid, reference, policy, tolerances(precision, workload.tolerances),
                             inputs, params, f"{framework} {variant} ({cid.name})")
        verify.check_start(ctx, server.start())
        verify.check_gradient(ctx, server.evaluate(0))
        first = server.steps(1)
        rest = server.steps(workload.check_steps - 1) if workload.check_steps > 1 else None
        verify.check_steps(ctx, first, rest)
    finally:
        oracle.close()
