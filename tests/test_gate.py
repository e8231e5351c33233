"""The regression gate: statistics on synthetic rounds, and the plugin session against saved
JSON. No assertion here depends on how fast anything ran: baselines are synthetic and either
absurdly slow or absurdly fast next to any real round."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import gate

BENCH_MODULE = """
def test_fast(benchmark):
    benchmark.extra_info["steps_per_call"] = 1
    benchmark.pedantic(lambda: None, rounds=20, iterations=1)
"""


def bench_json(fullname: str, rounds: list[float], **extra_info: Any) -> dict[str, Any]:
    """One pytest-benchmark entry with raw rounds (what --benchmark-save-data writes)."""
    name = fullname.split("::")[-1]
    data = sorted(rounds)
    stats = {"min": data[0], "max": data[-1], "mean": float(np.mean(data)),
             "median": float(np.median(data)), "stddev": float(np.std(data)), "rounds": len(data),
             "iterations": 1, "data": list(rounds)}
    return {"group": extra_info.pop("group", None), "name": name, "fullname": fullname,
            "params": None, "param": None, "extra_info": extra_info, "options": {},
            "stats": stats}


def run_json(*benches: dict[str, Any], machine: dict[str, Any] | None = None) -> dict[str, Any]:
    info = {"python_version": "3.11.0", "mlbench": machine or {
        "cpu": {"model": "Test CPU", "simd_flags": ["avx2"], "logical_cores": 2,
                "usable_cores": 2},
        "blas": {"name": "openblas", "version": "0.3"}, "threads": {}, "packages": {},
        "gpus": []}}
    return {"machine_info": info, "commit_info": {}, "benchmarks": list(benches),
            "datetime": "2025-01-01T00:00:00+00:00", "version": "5.3.1"}


def noisy(median: float, n: int = 60, seed: int = 0) -> list[float]:
    """Log-normal rounds around ``median`` with 5% spread, like a quiet CPU's."""
    rng = np.random.default_rng(seed)
    return list(median * np.exp(0.05 * rng.standard_normal(n)))


def test_identical_rounds_pass() -> None:
    rounds = noisy(1e-3)
    found = gate.compare_rounds("b", rounds, rounds, threshold=0.1, alpha=0.01)
    assert found.verdict == "no significant change" and not found.failed
    assert found.change == 0 and found.p_value > 0.4


def test_twenty_percent_slower_fails_with_readable_verdict() -> None:
    found = gate.compare_rounds("b", noisy(1e-3), noisy(1.2e-3, seed=1), threshold=0.1,
                                alpha=0.01)
    assert found.failed and found.verdict == "SLOWER"
    assert 0.15 < found.change < 0.25 and found.p_value < 1e-6
    row = gate.table([found])[1].split()
    assert row[0] == "b" and row[-1] == "SLOWER" and row[3].startswith("+")
    assert gate.summary([found]).startswith("mlbench gate: FAILED: 1 of 1 benchmarks slower: b +")


@pytest.mark.parametrize(("factor", "verdict"), [
    (1.05, "slower, within threshold"),  # significant but a small effect: passes
    (0.7, "faster"),
])
def test_effect_size_and_direction(factor: float, verdict: str) -> None:
    found = gate.compare_rounds("b", noisy(1e-3), noisy(1e-3 * factor, seed=2), threshold=0.1,
                                alpha=0.01)
    assert found.verdict == verdict and not found.failed


def test_too_few_rounds_is_inconclusive_not_a_failure() -> None:
    found = gate.compare_rounds("b", [1.0, 1.0, 1.0], [9.0, 9.0, 9.0], threshold=0.1, alpha=0.01)
    assert found.verdict == "inconclusive (3+3 rounds)" and not found.failed


def test_rounds_are_per_training_step_and_thresholds_per_benchmark() -> None:
    base = run_json(bench_json("t.py::a", noisy(1e-2), steps_per_call=10),
                    bench_json("t.py::b", noisy(1e-3)))
    cur = run_json(bench_json("t.py::a", noisy(1.3e-2, seed=3), steps_per_call=10),
                   bench_json("t.py::b", noisy(1.3e-3, seed=3)), bench_json("t.py::new", [1, 2]))
    a, b = gate.compare_runs(base, cur, threshold=0.1, alpha=0.01, thresholds={"t.py::b": 0.5})
    assert a.baseline_median == pytest.approx(1e-3, rel=0.05) and a.failed
    assert b.threshold == 0.5 and b.verdict == "slower, within threshold"
    assert gate.unmatched(base, cur) == ["new"]


def write(path: Path, run: dict[str, Any]) -> Path:
    path.write_text(json.dumps(run))
    return path


def test_gate_session_passes_against_a_slower_baseline(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fast=BENCH_MODULE)
    base = write(pytester.path / "base.json",
                 run_json(bench_json("test_fast.py::test_fast", [10.0] * 20)))
    result = pytester.runpytest(f"--mlbench-gate={base}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*mlbench gate against*base.json*",
                                 "test_fast * faster",
                                 "mlbench gate: passed (1 benchmarks, none significantly slower)"])


def test_gate_session_fails_against_a_faster_baseline(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fast=BENCH_MODULE)
    base = write(pytester.path / "base.json",
                 run_json(bench_json("test_fast.py::test_fast", [1e-12] * 20)))
    result = pytester.runpytest(f"--mlbench-gate={base}", "--mlbench-gate-threshold=50%")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["benchmark*baseline (ms)*current (ms)*change*limit*p-value*"
                                 "verdict",
                                 "test_fast * 50% * SLOWER",
                                 "mlbench gate: FAILED: 1 of 1 benchmarks slower: test_fast +*"])


def test_gate_warns_listing_fingerprint_differences(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fast=BENCH_MODULE)
    machine = {"cpu": {"model": "Other CPU", "simd_flags": [], "logical_cores": 64,
                       "usable_cores": 64}, "blas": {"name": "mkl", "version": "2024"},
               "threads": {}, "packages": {"numpy": "1.0.0"}, "gpus": []}
    base = write(pytester.path / "base.json",
                 run_json(bench_json("test_fast.py::test_fast", [10.0] * 20), machine=machine))
    result = pytester.runpytest(f"--mlbench-gate={base}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*PytestWarning: mlbench: baseline *base.json comes from a "
                                 "different machine fingerprint: *blas: mkl 2024 -> *",
                                 "machine differs: cpu.model: Other CPU -> *",
                                 "machine differs: version.numpy: 1.0.0 -> *"])


def test_bad_marker_threshold_fails_that_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fast="""
        import pytest

        @pytest.mark.mlbench_gate(threshold="lots")
        def test_fast(benchmark):
            benchmark(lambda: None)
    """)
    base = write(pytester.path / "base.json", run_json())
    result = pytester.runpytest(f"--mlbench-gate={base}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.mlbench_gate(threshold=...): 'lots' is not a "
                                 "percentage; give e.g. 10%"])


@pytest.mark.parametrize(("option", "message"), [
    ("--mlbench-gate-threshold=abc", "--mlbench-gate-threshold: 'abc' is not a percentage*"),
    ("--mlbench-gate-threshold=0", "--mlbench-gate-threshold: '0' is out of range; give a "
                                   "percentage above 0% up to 1000%"),
    ("--mlbench-gate-alpha=2", "--mlbench-gate-alpha: '2' is out of range*between 0 and 1"),
    ("--mlbench-save-mode=sometimes", "--mlbench-save-mode: unknown value 'sometimes'; choose "
                                      "from: new, overwrite"),
    ("--mlbench-save=a/b", "--mlbench-save: 'a/b': use letters, digits, '.', '_' and '-'"),
])
def test_bad_option_values_are_usage_errors(pytester: pytest.Pytester, option: str,
                                            message: str) -> None:
    result = pytester.runpytest(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_a_slower_control_is_reported_never_failed() -> None:
    base = run_json(bench_json("c.py::control", noisy(1e-3), control="matmul"))
    cur = run_json(bench_json("c.py::control", noisy(2e-3, seed=4), control="matmul"))
    (found,) = gate.compare_runs(base, cur, threshold=0.1, alpha=0.01)
    assert found.verdict == gate.CONTROL_SLOWER and not found.failed
