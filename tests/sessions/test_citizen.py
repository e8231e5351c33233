"""An installed plugin is a guest in every pytest session of its environment: for any other
project, collected ids, outcomes, the report header and pytest-benchmark's JSON are exactly
those of ``-p no:mlbench``. Each peer below defines fixtures named as the plugin's used to be
(``device``, ``precision``, ``framework``) in one of the ways real projects do."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

PEERS = {
    "params-fixture": """
import pytest

@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    return request.param

@pytest.fixture
def precision():
    return "float32"

def test_matmul(device, precision):
    assert device in ("cpu", "cuda") and precision == "float32"
""",
    "own-generate-tests": """
def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", ["cpu", "mps"])
    if "framework" in metafunc.fixturenames:
        metafunc.parametrize("framework", ["torch"], ids=["pt"])

def test_step(device, framework):
    assert framework == "torch"

def test_plain():
    pass
""",
    "plain-fixtures": """
import pytest

@pytest.fixture
def device(request):
    return request.config.getoption("--device")

@pytest.fixture
def precision():
    return "fp32"

@pytest.fixture
def framework():
    return "numpy"

@pytest.mark.parametrize("size", [8, 16])
def test_filter(device, precision, framework, size):
    assert size in (8, 16)

def test_fails_on_purpose(device):
    assert device == "never"
""",
}

# a short benchmark: what these tests compare is the JSON and the output, not the times
SHORT = ("--benchmark-max-time=0.02", "--benchmark-min-rounds=3")
BENCH = """
def test_sum(benchmark):
    benchmark.extra_info["kind"] = "peer"
    assert benchmark(sum, range(100)) == 4950
"""


def _outcome(result: pytest.RunResult) -> tuple[Any, ...]:
    counts = result.parseoutcomes()
    ids = sorted(line.split(" ")[0] for line in result.stdout.lines if "::" in line)
    return counts, ids, result.ret


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-v", "-p", "no:cacheprovider", *args)


PEER_OPTION = """
def pytest_addoption(parser):
    parser.addoption("--device", default="cpu")
"""


@pytest.mark.parametrize("peer", sorted(PEERS))
def test_peer_ids_and_outcomes_are_untouched(pytester: pytest.Pytester, peer: str) -> None:
    pytester.makeconftest(PEER_OPTION)
    pytester.makepyfile(**{"test_peer": PEERS[peer]})
    with_plugin = _run(pytester)
    without = _run(pytester, "-p", "no:mlbench")
    assert _outcome(with_plugin) == _outcome(without)
    if peer == "plain-fixtures":
        again = _run(pytester, "--device=cuda")
        assert any("test_filter[8]" in line for line in again.stdout.lines), again.stdout.str()
        assert not any("cuda-" in line or "-cpu" in line or "fp32" in line
                       for line in again.stdout.lines)


def _ids(result: pytest.RunResult) -> list[str]:
    """Collected lines without the summary's wall time, which differs between any two runs."""
    return [re.sub(r" in [0-9.]+s", "", line) for line in result.stdout.lines]


def test_collect_only_ids_are_untouched(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**{"test_" + name.replace("-", "_"): text for name, text in PEERS.items()})
    with_plugin = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    without = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider",
                                 "-p", "no:mlbench")
    assert _ids(with_plugin) == _ids(without)
    assert with_plugin.ret == without.ret == pytest.ExitCode.OK
    assert sum("::" in line for line in with_plugin.stdout.lines) == 8


def test_report_header_is_untouched(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_peer=PEERS["params-fixture"])
    result = _run(pytester)
    assert not any(line.startswith("mlbench") for line in result.stdout.lines)


def _bench_json(pytester: pytest.Pytester, name: str, *args: str) -> dict[str, Any]:
    out = pytester.path / f"{name}.json"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--benchmark-json={out}", *SHORT,
                                *args)
    assert result.ret == 0, result.stdout.str()
    return json.loads(out.read_text())


def _stable(run: dict[str, Any]) -> dict[str, Any]:
    """Everything but what differs between any two runs (times, dates, volatile machine facts)."""
    keep = {k: v for k, v in run.items() if k not in ("datetime",)}
    keep["benchmarks"] = [{k: v for k, v in b.items() if k != "stats"} for b in run["benchmarks"]]
    keep["machine_info"] = {k: v for k, v in run["machine_info"].items() if k != "cpu"}
    return keep


def test_pytest_benchmark_json_is_untouched(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bench=BENCH)
    with_plugin = _bench_json(pytester, "with")
    without = _bench_json(pytester, "without", "-p", "no:mlbench")
    assert "mlbench" not in with_plugin["machine_info"]
    assert _stable(with_plugin) == _stable(without)


def test_benchmark_compare_across_install_stays_quiet(pytester: pytest.Pytester) -> None:
    """A run saved before the plugin was installed compares without a machine_info warning,
    even when warnings are errors."""
    pytester.makepyfile(test_bench=BENCH)
    # every warning an error but pytest's own about rewriting: an in-process run finds the
    # plugin imported already by this test session, and where that import went through an
    # editable install's finder (a developer's checkout) pytest could not rewrite it then
    pytester.makeini("[pytest]\nfilterwarnings =\n    error\n"
                     "    ignore::pytest.PytestAssertRewriteWarning\n")
    saved = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:mlbench",
                               "--benchmark-save=before", *SHORT)
    assert saved.ret == 0
    compared = pytester.runpytest("-p", "no:cacheprovider", "--benchmark-compare=0001", *SHORT)
    assert compared.ret == 0, compared.stdout.str()
    assert "INTERNALERROR" not in compared.stdout.str() + compared.stderr.str()
    assert not re.search(r"machine_info is different", compared.stdout.str())


def test_peer_runs_without_pytest_benchmark(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_peer=PEERS["params-fixture"])
    result = _run(pytester, "-p", "no:benchmark")
    assert result.ret == 0 and "pytest-mlbench" not in result.stdout.str() + result.stderr.str()


def test_own_cases_without_pytest_benchmark_is_one_line_usage_error(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ours="def test_x(mlbench_settings):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:benchmark")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-mlbench needs pytest-benchmark*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
