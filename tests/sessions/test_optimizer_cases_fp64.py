"""One float64 optimizer case per framework through the real plugin and engine: the test line
runs the suites at their default precision (float32), where a different optimizer algorithm
can hide inside the tolerance; at float64 it cannot (issue 32: Keras's Adam, torch.compile'd
Adam with a float32 step count). The cases are chosen to cover every optimizer and the
framework parts that were fixed: Keras's AdamW (the spec's Adam step, its decay at float64),
torch's compiled Adam, optax momentum, and the spec's update in NumPy and Autograd."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_mlbench import frameworks
from tests.cheat_session import parse

ROOT = Path(__file__).resolve().parents[2]
CASES = {
    "tensorflow": "mlp_optim-adamw-tensorflow-jit-cpu-fp64",
    "torch": "mlp_optim-adam-torch-jit-cpu-fp64",
    "jax": "mlp_optim-momentum-jax-jit-cpu-fp64",
    "numpy": "mlp_optim-adam-numpy-eager-cpu-fp64",
    "autograd": "mlp_optim-adamw-autograd-eager-cpu-fp64",
}
TIMEOUT_S = 600


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """{case: (status, message)} of one --benchmark-disable session over CASES."""
    installed = [c for f, c in CASES.items()
                 if frameworks.missing_reason(f, frameworks.BUILTIN) is None]
    if not installed:
        pytest.skip("none of " + ", ".join(CASES) + " is installed")
    report = tmp_path_factory.mktemp("fp64") / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
         "--mlbench-precision=fp64", "--mlbench-size=smoke", "--benchmark-disable",
         "--mlbench-threads=1", f"--junitxml={report}", "-o", "junit_family=xunit2",
         *(f"suites/test_workloads.py::test_case[{case}]" for case in installed)],
        cwd=ROOT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, capture_output=True,
        text=True, timeout=TIMEOUT_S, check=False)
    if not report.exists():
        raise AssertionError(f"the session wrote no report:\n{done.stdout}{done.stderr}")
    return {name: (r.status, r.message) for name, r in parse(report).items()}


@pytest.mark.parametrize("framework", sorted(CASES))
def test_a_float64_optimizer_case_passes(results: dict[str, tuple[str, str]],
                                         framework: str) -> None:
    reason = frameworks.missing_reason(framework, frameworks.BUILTIN)
    if reason:
        pytest.skip(reason)
    status, message = results.get(CASES[framework], ("not run", "the session did not run it"))
    assert status == "passed", f"{CASES[framework]}: {status}: {message}"
