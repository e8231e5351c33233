"""The gates at three processes a side (issue 52), simulated from the committed baseline's
rounds by tools/gate_power.py: first that the simulation's statistics are the gates' own, case
for case (judging/ab.py, judging/regression.py), then what the gates promise on this host's
measured spread. Each promise is also shown failing for the statistic it replaced. Nothing here
is timed; the rounds are those baselines/amd-epyc-2c/0001_main.json recorded."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import stats
from pytest_mlbench.judging import ab, regression
from pytest_mlbench.measuring.outcome import Outcome
from pytest_mlbench.storing import runs
from pytest_mlbench.storing.record import Measure, Record
from tests.synthetic import bench, identity, run_json

ROOT = Path(__file__).resolve().parents[3]
ALPHA, THRESHOLD, PROCESSES, TRIALS = 0.01, 0.10, 3, 600


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gate_power", ROOT / "tools" / "gate_power.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gate_power"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


gate_power = _tool()


@pytest.fixture(scope="module")
def host() -> Any:
    return gate_power.Host.load(gate_power.BASELINE)


@pytest.fixture(scope="module")
def ab_found(host: Any) -> Any:
    return gate_power.ab_logs(host, np.random.default_rng(52), TRIALS, PROCESSES)


@pytest.fixture(scope="module")
def ab_logs(ab_found: Any) -> np.ndarray:
    """Each simulated pair's log ratio as the gate reads it: matched by cycle."""
    return ab_found.cycle


@pytest.fixture(scope="module")
def stored_logs(host: Any) -> tuple[np.ndarray, np.ndarray]:
    return gate_power.stored_logs(host, np.random.default_rng(53), TRIALS // 2, PROCESSES)


def verdicts(found: Any) -> dict[str, float]:
    return {"p": float((found.p_slower < ALPHA).mean()), "SLOWER": float(found.slower.mean())}


def ab_at(logs: np.ndarray, slowdown: float, moderated: bool = True) -> dict[str, float]:
    return verdicts(gate_power.ab_verdicts(logs, gate_power.ab_variances(logs, moderated),
                                           slowdown, alpha=ALPHA, threshold=THRESHOLD))


def stored_at(base: np.ndarray, cur: np.ndarray, groups: np.ndarray, slowdown: float,
              how: str = "", between: bool = True) -> dict[str, float]:
    found = gate_power.stored_variances(base, cur, groups, how or gate_power.STORED[0],
                                        between)
    return verdicts(gate_power.stored_verdicts(found, slowdown, alpha=ALPHA,
                                               threshold=THRESHOLD))


# -- the simulation judges as the gates do ----------------------------------------------------

def one_round(log: float) -> tuple[float, ...]:
    return (float(math.exp(log)),)


def case_record(c: int, group: int, logs: np.ndarray) -> Record:
    """Case ``c`` of comparison group ``group``, one round a process at exp(log)."""
    ident = identity(workload=f"g{group}", head=f"g{group}", dims={"case": c})
    return Record(ident, f"g{group}-c{c}", Measure(1, tuple(one_round(x) for x in logs)))


def test_the_simulated_ab_gate_is_judging_ab(host: Any, ab_logs: np.ndarray) -> None:
    """p(slower) of every case of two simulated sessions, from ab.compare with the session's
    prior (ab.session_prior), equal the simulation's."""
    ab_logs = ab_logs[:1]
    found = gate_power.ab_verdicts(ab_logs, gate_power.ab_variances(ab_logs), 0.05,
                                   alpha=ALPHA, threshold=THRESHOLD)
    for t in range(len(ab_logs)):
        pairs = {f"c{c}": (Outcome("passed", record=case_record(c, 0, np.zeros(PROCESSES))),
                           Outcome("passed", record=case_record(
                               c, 0, ab_logs[t, c] + math.log1p(0.05))))
                 for c in range(len(host.names))}
        prior = ab.session_prior(pairs)
        assert prior is not None
        p = [ab.compare(name, b, h, threshold=THRESHOLD, alpha=ALPHA, prior=prior)
             for name, (b, h) in pairs.items()]
        assert np.allclose([r.ratio.p_slower for r in p], found.p_slower[t], rtol=1e-9)
        assert [r.failed for r in p] == list(found.slower[t])


def test_the_simulated_pairs_are_read_as_the_gate_reads_them(host: Any) -> None:
    """A simulated pair of processes' log ratios, by cycle and by process medians, equal
    stats.paired_logs's on the same rounds with the cycles the run recorded (one to three
    rounds a cycle), and without them."""
    rng = np.random.default_rng(11)
    for c in (0, 2, 5, len(host.names) - 1, *rng.integers(0, len(host.names), 5)):
        labels = host.cycles[c][0]
        base, head = (0.2 * rng.standard_normal((4, len(labels))) for _ in range(2))
        process, cycle, _ = gate_power.pair_logs(base, head, labels)
        for t in range(4):
            rounds = [list(np.exp(base[t]))], [list(np.exp(head[t]))]
            assert stats.paired_logs(*rounds, ((labels,), (labels,)))[0] == pytest.approx(
                cycle[t], rel=1e-9, abs=1e-12)
            assert stats.paired_logs(*rounds)[0] == pytest.approx(process[t], rel=1e-9,
                                                                  abs=1e-12)


def test_the_simulated_stored_gate_is_judging_regression(
        host: Any, stored_logs: tuple[np.ndarray, np.ndarray]) -> None:
    """The same for two simulated stored runs and regression.judge: each figure's spread from
    its comparison group, and the variance between the runs."""
    base, cur = (logs[:1] for logs in stored_logs)
    found = gate_power.stored_verdicts(gate_power.stored_variances(base, cur, host.groups),
                                       0.0, alpha=ALPHA, threshold=THRESHOLD)
    for t in range(len(base)):
        sides = [runs.from_json(run_json(*[bench(case_record(c, int(g), logs[t, c]))
                                           for c, g in enumerate(host.groups)]), name)
                 for logs, name in ((base, "base"), (cur, "cur"))]
        j = regression.judge(*sides, threshold=THRESHOLD, alpha=ALPHA)
        assert np.allclose([r.ratio.p_slower for r in j.rows], found.p_slower[t], rtol=1e-9)


# -- what the gates promise -------------------------------------------------------------------

def test_the_ab_gate_flags_at_most_one_unchanged_case_in_a_hundred(ab_logs: np.ndarray) -> None:
    """A/A, the same code both sides, three processes a side: at most 1% of cases SLOWER at
    alpha 0.01 and the 10% threshold (measured 0.1%), and the test alone says slower for at
    most 1.5% (measured 1.1%: the noisiest cases' variance is pulled down towards the
    session's; the threshold keeps them from failing). A z-test on the same variances (no
    degrees of freedom counted at all) flags far more."""
    found = ab_at(ab_logs, 0.0)
    assert found["SLOWER"] <= 0.01 and found["p"] <= 0.015
    var, _ = gate_power.ab_variances(ab_logs, moderated=False)
    z = gate_power.ab_verdicts(ab_logs, (var, np.full(var.shape, np.inf)), 0.0, alpha=ALPHA,
                               threshold=THRESHOLD)
    assert verdicts(z)["p"] > 0.05


def test_the_ab_gate_catches_a_slowdown_the_plain_test_cannot(ab_logs: np.ndarray) -> None:
    """One case of the session slowed (each in turn), three processes a side, pairs read by
    cycle. 10% slower: the moderated test says slower in at least 90% of trials (measured
    93%; 71-100% by case), more than twice the plain paired t on two degrees of freedom
    (38%). 20% slower (tools/slowdown's calibration): SLOWER, failing the gate, in at least
    95% (measured 99.7%); the plain test fails it (76%). 5%: reported in docs/GATE.md
    (40%)."""
    moderated, plain = ab_at(ab_logs, 0.10), ab_at(ab_logs, 0.10, moderated=False)
    assert moderated["p"] >= 0.90 and moderated["p"] >= 2 * plain["p"]
    assert ab_at(ab_logs, 0.20)["SLOWER"] >= 0.95
    assert ab_at(ab_logs, 0.20, moderated=False)["SLOWER"] < 0.95
    assert ab_at(ab_logs, 0.05, moderated=False)["p"] < ab_at(ab_logs, 0.05)["p"] < 0.5


def test_pairs_read_by_cycle_find_more_than_pairs_of_process_medians(ab_found: Any) -> None:
    """The same simulated sessions, each pair read as the ratio of its two processes'
    medians (the gate before): 10% found in 77% (by cycle 93%), false alarms as low."""
    by_cycle, by_medians = ab_at(ab_found.cycle, 0.10), ab_at(ab_found.process, 0.10)
    assert by_medians["p"] < 0.85 and by_cycle["p"] >= by_medians["p"] + 0.10
    assert ab_at(ab_found.process, 0.0)["SLOWER"] <= 0.01


def test_cycles_are_not_counted_as_units(host: Any) -> None:
    """Each side's process with an offset of its own (3% sd, a what-if: the committed
    baseline's rounds show none pooled over its groups, up to 5.6% in one): the gate, whose
    test counts process pairs, still says slower for at most 1.5% of unchanged cases
    (measured 0.9%); a test that takes each cycle pair as a unit, the process pair a block,
    says so for more than 3% (measured 6.5%, one case 19%)."""
    found = gate_power.ab_logs(host, np.random.default_rng(54), TRIALS // 2, PROCESSES, 0.03)
    assert ab_at(found.cycle, 0.0)["p"] <= 0.015
    units = gate_power.ab_verdicts(found.cycle, gate_power.block_variances(found, "units"),
                                   0.0, alpha=ALPHA, threshold=THRESHOLD)
    assert verdicts(units)["p"] > 0.03


def test_the_stored_gate_flags_at_most_one_unchanged_case_in_a_hundred(
        host: Any, stored_logs: tuple[np.ndarray, np.ndarray]) -> None:
    """Two unchanged runs: with each figure's comparison group's spread (the gate's) at most
    1% of cases flagged (measured 0.4-0.8%). A flat prior over the run's figures, whose
    spreads differ group by group, flags more (1.2-1.8% here, up to 5% of the noisiest
    group's trials)."""
    base, cur = stored_logs
    assert stored_at(base, cur, host.groups, 0.0)["p"] <= 0.01
    assert stored_at(base, cur, host.groups, 0.0, gate_power.STORED[1], between=False)["p"] > 0.012


def test_the_stored_gate_counts_the_days_between_the_runs(host: Any) -> None:
    """Two unchanged runs whose figures also moved by 10% (sd) from one day to the other (a
    what-if: one run cannot measure it): the between-run variance (spread.between_runs)
    keeps the gate's false alarms near 1% (at most 1.5%; measured 1.3%, where the variance
    known exactly gives 1.1%); without it, 4% of unchanged cases fail."""
    base, cur = gate_power.stored_logs(host, np.random.default_rng(153), 200, PROCESSES,
                                       between=0.10)
    assert stored_at(base, cur, host.groups, 0.0)["p"] <= 0.015
    assert stored_at(base, cur, host.groups, 0.0, between=False)["p"] > 0.03


# -- other plans: --max-time, --min-rounds, --cycles (tools/gate_layout.py) -------------------

def test_a_plan_lays_the_rounds_out_as_the_campaign_would(host: Any) -> None:
    """At the run's plan a case of many calls a round records as the run did; a longer
    max-time gives a fast case (mlp's NumPy step, 11-13 ms rounds) more rounds and leaves a
    slow one (pex's NumPy step, 140-230 ms) at the floor of one round a cycle; a higher
    min-rounds raises the floor for every case, in the same six turns; more cycles, more
    turns; a case of one call a round records two rounds a turn (schedule.turn_rounds)."""
    layout = gate_power.gate_layout
    fast, slow = (host.names.index(n) for n in ("mlp-numpy-eager-cpu-fp32",
                                                "pex-numpy-eager-cpu-fp32"))
    one_call = next(c for c, cost in enumerate(host.costs) if cost.calls == 1)

    def counts(c: int, *options: Any) -> list[int]:
        plan = layout.Plan(3, *options)
        return np.bincount(layout.labels(host.costs[c], plan), minlength=plan.cycles).tolist()

    recorded = [len(x) for x in host.rounds[fast]]
    assert min(recorded) <= sum(counts(fast, 0.5)) <= max(recorded)
    assert sum(counts(fast, 1.0)) >= 1.8 * sum(counts(fast, 0.5))
    assert counts(slow, 0.5) == counts(slow, 1.5) == [1] * 6
    assert counts(slow, 0.5, 36) == [2] * 6 and counts(slow, 0.5, 36, 12) == [1] * 12
    assert counts(one_call, 0.5) == [2, 0, 2, 0, 2, 0]
    cost = layout.pass_cost(host.costs, layout.Plan(3, 0.5, 36))
    assert cost.recorded > 1.5 * layout.pass_cost(host.costs, layout.Plan(3, 0.5)).recorded


def test_the_plan_options_reach_the_simulated_pairs(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``--min-rounds 36`` (two rounds a turn at the floor) narrows the simulated pairs
    (their sd, median case, as the tool prints it) below the run's layout's; ``--cycles``
    with it, more; an option the tool ignored would print the same sd."""
    def pair_sd(*options: str) -> float:
        monkeypatch.setattr(sys, "argv", ["gate_power", "--ab-only", "--trials", "40",
                                          *options])
        assert gate_power.main() == 0
        out = capsys.readouterr().out
        return float(out.split("(median case) ")[1].split("%")[0])

    recorded, floor, cycles = (pair_sd(), pair_sd("--min-rounds", "36"),
                               pair_sd("--min-rounds", "36", "--cycles", "12"))
    assert floor < 0.85 * recorded and cycles < floor


def test_spread_parts_finds_where_the_spread_was_put() -> None:
    """Simulated rounds, 3 processes of 6 turns of 3 rounds, with known parts (sd: process
    10%, turn 6%, round 4%) for 200 cases: the parts recovered within 15%; with each
    process's offset shared by a group of five cases, less_pass_effects leaves (near) no
    process part; with a case's own offset (5%) it leaves that."""
    layout = gate_power.gate_layout
    rng = np.random.default_rng(7)
    cycles = [np.repeat(np.arange(6), 3)] * 3

    def rounds(shared: np.ndarray, own: float) -> list[np.ndarray]:
        return [shared[i] + own * rng.standard_normal() + 0.06 * np.repeat(
            rng.standard_normal(6), 3) + 0.04 * rng.standard_normal(18) for i in range(3)]

    cases, groups = [], np.repeat(np.arange(40), 5)
    for g in range(40):
        shared = 0.10 * rng.standard_normal(3)
        cases += [rounds(shared, 0.0) for _ in range(5)]
    found = layout.spread_parts(cases, [cycles] * 200)
    per_case = np.array([found.round, found.turn, found.process]) / found.cases
    assert np.allclose(per_case, [0.04**2, 0.06**2, 0.10**2], rtol=0.15)
    assert abs(layout.spread_parts(layout.less_pass_effects(cases, groups),
                                   [cycles] * 200).process / 200) < 0.01**2
    own = [rounds(np.zeros(3), 0.05) for _ in range(200)]
    left = layout.spread_parts(layout.less_pass_effects(own, groups), [cycles] * 200)
    assert left.process / 200 == pytest.approx(0.05**2, rel=0.3)
