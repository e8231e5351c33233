"""One owner for a case's state: a pass hands what it found over as one PassFacts, the case's
state takes it in one call (CaseState.add), and its record is made from what it took; the
ranks of a data-parallel case agree on typed replies or the case fails; the measuring
modules import each other one way."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_mlbench.checking import audit
from pytest_mlbench.engine import protocol as p
from pytest_mlbench.measuring.case_run import PassFacts
from pytest_mlbench.measuring.ledger import PassTiming, RecordedRound
from pytest_mlbench.measuring.outcome import CaseState, outcome_of
from pytest_mlbench.measuring.plan import Lane, Plan, Side
from pytest_mlbench.measuring.ranks import agree
from pytest_mlbench.workloads import catalogue
from pytest_mlbench.workloads.case import CaseId

PACKAGE = Path(__file__).resolve().parents[3] / "pytest_mlbench"
SUITES = PACKAGE.parent / "suites"
PLAN = Plan(timing=True, processes=2, threads=1, affinity="off", seed=0, size="smoke",
            max_time=1.0, min_rounds=5)


def _state() -> CaseState:
    workload = catalogue.load_workload(SUITES / "mlp")
    cid = CaseId(workload, workload.sizes["smoke"][0], workload.all_tasks[0], "numpy",
                 "eager", "cpu", "fp32")
    return CaseState(cid, Lane(Side(), catalogue.Catalogue(SUITES, (workload,)), (cid,)))


def _facts(full: bool, seconds: list[float], cycles: list[int], **kw: Any) -> PassFacts:
    rounds = tuple(RecordedRound(s, c, 6) for s, c in zip(seconds, cycles, strict=True))
    base: dict[str, Any] = dict(
        full=full, workers=({"threads": {"blas": 1}, "versions": {}, "pinned": {},
                             "compiler_start_s": None},),
        pinned={"pinned": False}, heap={"pretouched": True},
        timing=PassTiming(rounds, 3.0) if rounds else None, audited_rounds=(1,),
        uncounted_rounds=(), audit_secret=7 if full else 8, data_secret=9 if full else 10,
        clock=audit.Clock(turns=1),
        compiles={"timing": 0}, census={"w": 3}, arithmetic={},
        compile_s=0.5 if full else None, first_call_s=0.01 if full else None,
        peak_memory=(1024, "step") if full else None)
    base.update(kw)
    return PassFacts(**base)


def test_a_record_is_made_from_the_passes_its_state_took() -> None:
    state = _state()
    state.add(_facts(True, [0.1, 0.2], [0, 1]))
    state.add(_facts(False, [0.3], [2]))
    outcome = outcome_of(state, PLAN, {})
    assert outcome.status == "passed" and outcome.rounds == [0.1, 0.2, 0.3]
    assert outcome.record is not None and outcome.record.measure is not None
    m = outcome.record.measure
    assert (m.passes, m.cycles, m.faults_per_step) == (((0.1, 0.2), (0.3,)), ((0, 1), (2,)),
                                                       (3.0, 3.0))
    assert (m.compile_s, m.first_call_s) == (0.5, 0.01)  # the first pass's alone
    env, checks = outcome.record.environment, outcome.record.checks
    assert list(env) == ["workers", "pinned", "heap", "peak_memory", "affinity", "processes",
                         "seed", "size"]
    assert env["processes"] == 2 and len(env["pinned"]) == 2 and env["peak_memory"] == (1024,
                                                                                        "step")
    assert list(checks) == ["audited_rounds", "uncounted_rounds", "audit_secrets",
                            "data_secrets", "clocks", "compiles", "census", "arithmetic"]
    assert checks["audit_secrets"] == [7, 8] and checks["audited_rounds"] == [[1], [1]]
    assert checks["data_secrets"] == [9, 10]


def test_a_pass_that_timed_nothing_adds_its_checks_and_no_process() -> None:
    state = _state()
    state.add(_facts(True, [], []))
    record = outcome_of(state, PLAN, {}).record
    assert record is not None and record.measure is None
    assert record.environment["processes"] == 0 and record.checks["audit_secrets"] == [7]


def _stepped(w: float, loss: float, time: float) -> p.Stepped:
    return p.Stepped(losses=[loss], times=[time],
                     snapshot={"params": {"w": np.array([w])}, "state": {}}, dtypes={})


def test_ranks_agree_on_typed_replies_losses_averaged_times_the_slowest() -> None:
    found = agree([_stepped(1.0, 2.0, 0.1), _stepped(1.0, 4.0, 0.3)], "mlp")
    assert found.losses == [3.0] and found.times == [0.3]
    grad = agree([p.Gradient(np.float64(1.0), {"w": np.ones(2)}),
                  p.Gradient(np.float64(3.0), {"w": np.ones(2)})], "mlp")
    assert grad.loss == 2.0


def test_ranks_whose_parameters_or_gradients_drift_fail() -> None:
    with pytest.raises(AssertionError, match="rank 1 vs rank 0 params"):
        agree([_stepped(1.0, 2.0, 0.1), _stepped(1.5, 2.0, 0.1)], "mlp")
    with pytest.raises(AssertionError, match="rank 1 vs rank 0 gradients"):
        agree([p.Gradient(1.0, {"w": np.ones(2)}), p.Gradient(1.0, {"w": np.zeros(2)})], "mlp")
    trained = [p.Finished(traces=None, compiles={}, backend_compiles={}, compile_s=0.0,
                          policy=None, census=None, dtypes={},
                          snapshot={"params": {"w": np.ones(1)}, "state": {}},
                          trained=p.Gradient(1.0, {"w": g})) for g in (np.ones(1), np.zeros(1))]
    with pytest.raises(AssertionError, match="after timing rank 1 vs rank 0 gradients"):
        agree(trained, "mlp")


def _imports(path: Path) -> set[str]:
    """The pytest_mlbench modules a file imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_mlbench"):
            found.add(node.module or "")
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("pytest_mlbench")}
    return found


@pytest.mark.parametrize("package", ["measuring", "engine"])
def test_no_two_modules_of_a_package_import_each_other(package: str) -> None:
    """Within measuring/ (campaign -> outcome -> case_run, plan) and engine/, imports run one
    way: no cycle, however indirect."""
    names = {f.stem for f in (PACKAGE / package).glob("*.py")} - {"__init__"}
    prefix = f"pytest_mlbench.{package}."
    graph = {n: {m[len(prefix):].split(".")[0] for m in _imports(PACKAGE / package / f"{n}.py")
                 if m.startswith(prefix)} & names - {n} for n in names}

    def reach(start: str) -> set[str]:
        seen, todo = set(), list(graph[start])
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo += graph[n]
        return seen

    cycles = sorted(n for n in names if n in reach(n))
    assert not cycles, f"{package}: modules in an import cycle: {cycles}"
    assert "campaign" not in reach("outcome") if package == "measuring" else True
