"""One float64 optimizer case per framework through the real plugin and engine: the test line
runs the suites at their default precision (float32), where a different optimizer algorithm
can hide inside the tolerance; at float64 it cannot (issue 32: Keras's Adam, torch.compile'd
Adam with a float32 step count). The cases are chosen to cover every optimizer and the
framework parts that were fixed: Keras's AdamW (the spec's Adam step, its decay at float64),
torch's compiled Adam, optax momentum, and the spec's update in NumPy and Autograd."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_mlbench import frameworks
from tests import background
from tests.background import Command
from tests.cheat_session import parse

ROOT = Path(__file__).resolve().parents[2]
CASES = {
    "tensorflow": "mlp_optim-adamw-tensorflow-jit-cpu-fp64",
    "torch": "mlp_optim-adam-torch-jit-cpu-fp64",
    "jax": "mlp_optim-momentum-jax-jit-cpu-fp64",
    "numpy": "mlp_optim-adam-numpy-eager-cpu-fp64",
    "autograd": "mlp_optim-adamw-autograd-eager-cpu-fp64",
}


def installed() -> list[str]:
    return [c for f, c in CASES.items() if frameworks.missing_reason(f, frameworks.BUILTIN) is None]


@background.session("fp64", fixture="results")
def fp64_command(folder: Path) -> Command:
    """One --benchmark-disable session over the installed CASES, in this repository (none
    installed: a session that only says pytest's version, never the whole catalogue)."""
    if not installed():
        return Command(["--version"], ROOT)
    return Command(["-p", "no:cacheprovider", "-q", "--mlbench-precision=fp64",
                    "--mlbench-size=smoke", "--benchmark-disable", "--mlbench-threads=1",
                    f"--junitxml={folder / 'report.xml'}", "-o", "junit_family=xunit2",
                    *(f"suites/test_workloads.py::test_case[{case}]" for case in installed())],
                   ROOT)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """{case: (status, message)} of the session over CASES."""
    if not installed():
        pytest.skip("none of " + ", ".join(CASES) + " is installed")
    done = background.result("fp64", tmp_path_factory)
    report = done.folder / "report.xml"
    if not report.exists():
        raise AssertionError(f"the session wrote no report:\n{done.output}")
    return {name: (r.status, r.message) for name, r in parse(report).items()}


@pytest.mark.parametrize("framework", sorted(CASES))
def test_a_float64_optimizer_case_passes(results: dict[str, tuple[str, str]],
                                         framework: str) -> None:
    reason = frameworks.missing_reason(framework, frameworks.BUILTIN)
    if reason:
        pytest.skip(reason)
    status, message = results.get(CASES[framework], ("not run", "the session did not run it"))
    assert status == "passed", f"{CASES[framework]}: {status}: {message}"
