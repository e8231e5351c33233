"""The gate's judgement on synthetic records: like with like, process-level statistics, and
nothing judged never a pass. No rounds here were timed."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from pytest_mlbench.judging import regression
from pytest_mlbench.storing import runs
from pytest_mlbench.storing.record import Measure, Record
from tests.synthetic import bench, identity, record, run_json


def run(*records: Record | None, **names: Any) -> runs.Run:
    return runs.from_json(run_json(*[bench(r) for r in records]), "test")


def judge(base: runs.Run, cur: runs.Run, **kw: Any) -> regression.Judgement:
    return regression.judge(base, cur, threshold=kw.pop("threshold", 0.10),
                            alpha=kw.pop("alpha", 0.01), **kw)


@pytest.mark.parametrize(("factor", "verdict"), [
    (1.0, "no significant change"),
    (1.30, "SLOWER"),
    (1.05, "slower, within threshold"),  # significant but below the minimum effect: passes
    (0.70, "faster"),
])
def test_verdicts_on_process_level_statistics(factor: float, verdict: str) -> None:
    base = run(record(median=1e-3))
    cur = run(record(median=1e-3 * factor, measure_kw={"seed": 0 if factor == 1 else 7}))
    (row,) = judge(base, cur).rows
    assert row.verdict == verdict and row.failed == (verdict == "SLOWER")
    assert row.ratio is not None and row.ratio.low <= row.ratio.value <= row.ratio.high
    assert row.baseline is not None and row.baseline.processes == 5


def test_one_slow_process_is_not_many_rounds() -> None:
    """Rounds of one process cannot speak for the next: 1 process is inconclusive, however
    many rounds it holds and however far apart the figures are."""
    base = run(record(median=1e-3, measure_kw={"processes": 1, "rounds": 500}))
    cur = run(record(median=9e-3, measure_kw={"processes": 5}))
    (row,) = judge(base, cur).rows
    assert row.verdict == "inconclusive (baseline has 1 process; 2 are needed)"
    assert not row.failed and not row.judged


def test_no_rounds_is_inconclusive() -> None:
    (row,) = judge(run(record(median=None)), run(record())).rows
    assert row.verdict == "inconclusive (baseline has no timed rounds)"


def test_a_smoke_run_is_not_comparable_with_a_default_size_baseline() -> None:
    """Same test, same case name, other dims: listed with the differences, never judged."""
    base = run(record(median=1e-3, dims={"batch": 1024, "d": 512}))
    cur = run(record(median=1e-5, dims={"batch": 64, "d": 32}))
    j = judge(base, cur)
    (row,) = j.rows
    assert row.verdict == ("not comparable: dims: {'batch': 1024, 'd': 512} -> "
                           "{'batch': 64, 'd': 32}") and not row.judged
    assert regression.summary(j) == "mlbench gate: nothing judged: 1 not comparable"
    assert regression.fails(j)


@pytest.mark.parametrize("change", [{"precision": "bf16", "dtype": "bfloat16"}, {"threads": 8},
                                    {"data_sha256": "ff" * 8}, {"variant": "eager"},
                                    {"hosts": "external"}])
def test_every_identity_fact_must_match(change: dict[str, Any]) -> None:
    base = run(record(median=1e-3))
    cur = run(record(median=1e-3, name=record().name, **change))
    (row,) = judge(base, cur).rows
    assert row.verdict.startswith("not comparable: ") and list(change)[0] in row.verdict


def test_partial_matches_judge_what_matches_and_list_the_rest() -> None:
    base = run(record("jax-jit"), record("numpy-eager", 2e-3), record("torch-eager"))
    cur = runs.from_json(run_json(bench(record("jax-jit", 1.5e-3, measure_kw={"seed": 3})),
                                  bench(record("numpy-eager", 2e-3)),
                                  bench(record("tf-xla")), bench(None, "t.py::plain")), "cur")
    j = judge(base, cur)
    assert [r.verdict for r in j.rows] == ["SLOWER", "no significant change"]
    assert j.missing == ("test_case[mlp-tf-xla-cpu-fp32]",) and j.plain == ("plain",)
    assert j.unrun == ("test_case[mlp-torch-eager-cpu-fp32]",)
    assert regression.details(j) == [
        "not in the baseline (not judged): test_case[mlp-tf-xla-cpu-fp32]",
        "in the baseline, not run this time: test_case[mlp-torch-eager-cpu-fp32]",
        "plain benchmarks without an mlbench record (not judged): plain"]
    assert regression.summary(j).startswith("mlbench gate: FAILED: 1 of 2 judged benchmarks "
                                            "slower: test_case[mlp-jax-jit-cpu-fp32] +5")
    assert regression.summary(j).endswith("; 1 not judged")


@pytest.mark.parametrize(("base", "cur", "why"), [
    ([], [], "no mlbench case ran"),
    ([record()], [None], "no mlbench case ran (1 plain benchmarks without an mlbench record)"),
    ([record("jax-jit")], [record("numpy-eager")], "1 not in the baseline"),
    ([record(measure_kw={"processes": 1})], [record()], "1 inconclusive"),
    ([record(measure_kw={"processes": 1}), record("numpy-eager", dims={"batch": 1})],
     [record(), record("numpy-eager")], "1 inconclusive, 1 not comparable"),
])
def test_nothing_judged_is_never_a_pass(base: list[Record], cur: list[Record | None],
                                        why: str) -> None:
    j = judge(run(*base), run(*cur))
    assert j.nothing_judged() == why and regression.fails(j)
    assert regression.summary(j) == f"mlbench gate: nothing judged: {why}"


def test_per_benchmark_thresholds_by_test_id() -> None:
    base, cur = run(record(median=1e-3)), run(record(median=1.3e-3, measure_kw={"seed": 5}))
    fullname = cur.entries[0].fullname
    (row,) = judge(base, cur, thresholds={fullname: 0.5}).rows
    assert row.threshold == 0.5 and row.verdict == "slower, within threshold"


def test_a_slower_control_is_reported_never_failed() -> None:
    base = run(record(median=1e-3, workload="control", head="control"))
    cur = run(record(median=2e-3, workload="control", head="control", measure_kw={"seed": 4}))
    (row,) = judge(base, cur).rows
    assert row.verdict == regression.CONTROL_SLOWER and not row.failed


def test_matching_is_by_identity_even_when_test_ids_differ() -> None:
    base = runs.from_json(run_json(bench(record(), "old.py::test_old")), "base")
    (row,) = judge(base, run(record())).rows
    assert row.judged


def test_table_columns_align_for_long_names() -> None:
    long = record(name="x" * 70)
    rows = judge(run(record(), long), run(record(), long)).rows
    lines = regression.table(rows)
    assert len(rows) == 2
    starts = [line.rindex("no significant change") for line in lines[1:]]
    assert len(set(starts)) == 1 and lines[0].index("verdict") == starts[0] > 80
    # right-aligned numbers end where their header ends
    assert {line[:lines[0].index("current (ms)") + 12].rstrip()[-1] for line in lines} <= set(
        "0123456789)")
    assert lines[0].split()[:3] == ["benchmark", "baseline", "(ms)"]


def spread_run(shifts: np.ndarray, name: str, seed: int) -> runs.Run:
    """A run of len(shifts) cases (one group), three processes each, 2% apart, each case's
    figure exp(shift)."""
    rng = np.random.default_rng(seed)
    return runs.from_json(run_json(*[bench(Record(
        identity(workload="g", head="g", dims={"case": c}), f"g-c{c}",
        Measure(1, tuple((float(math.exp(x + 0.02 * rng.standard_normal())),)
                         for _ in range(3))))) for c, x in enumerate(shifts)]), name)


def test_the_days_between_two_runs_count_against_a_slowdown() -> None:
    """Two runs of 30 unchanged cases whose figures moved 10% (sd) each from one day to the
    other, far beyond their processes' 2%: the gate finds that between-run variance and
    flags none of them (without it, Welch's t on the processes alone flags several)."""
    rng = np.random.default_rng(31)
    base = spread_run(np.zeros(30), "base", 1)
    cur = spread_run(0.10 * rng.standard_normal(30), "cur", 2)
    j = judge(base, cur, threshold=0.0)
    assert not [r.name for r in j.rows if r.verdict in ("SLOWER", "faster")]
    alone = [regression.compare(r.name, b, c, threshold=0.0, alpha=0.01)
             for r, (_, b), (_, c) in zip(j.rows, base.cases, cur.cases, strict=True)]
    assert sum(r.verdict in ("SLOWER", "faster") for r in alone) >= 5
