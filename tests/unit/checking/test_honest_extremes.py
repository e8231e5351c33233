"""Every thresholded check replayed on honest code's extremes, and failing just past them.

The committed baseline (baselines/amd-epyc-2c/0001_main.json: the main job on the project's
2-core host) keeps each case's clocks, precision statistics and GFLOP/s; every one of them
must pass its check (checking/margins.py: under 1.0), and the worst of each, pushed just past
its threshold, must fail the real assert_*. The float32 "too precise" check's honest extremes
come from tools/precision_sweep.py (docs/MEASURING.md), the float64-forward cheater's beside.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from pytest_mlbench.checking import arithmetic, audit, margins
from pytest_mlbench.checking.arithmetic import Statistic
from pytest_mlbench.checking.asserts import assert_plausible
from pytest_mlbench.measuring.outcome import PLAUSIBLE_MARGIN

BASELINE = Path(__file__).parents[3] / "baselines" / "amd-epyc-2c" / "0001_main.json"


@cache
def records() -> list[dict[str, Any]]:
    return [b["extra_info"]["mlbench"] for b in json.loads(BASELINE.read_text())["benchmarks"]
            if "mlbench" in b.get("extra_info", {})]


def worst(check: str) -> tuple[float, dict[str, Any], Any]:
    """The honest record with the largest margin of ``check``, and the part judged."""
    found = []
    for record in records():
        for entry in record["checks"]["clocks"]:
            clock = audit.Clock.from_record(entry)
            found += [(v, record, clock) for c, v in margins.of_clock(clock) if c == check]
        for what, entry in record["checks"]["arithmetic"].items():
            found += [(v, record, entry) for c, v in
                      margins.of_arithmetic(what, entry, record["identity"]["dtype"]) if c == check]
    return max(found, key=lambda f: f[0])


def test_every_honest_case_of_the_main_job_passes_every_thresholded_check() -> None:
    judged = [(c, v, r["name"]) for r in records() for c, v in margins.of_record(r, PLAUSIBLE_MARGIN)]
    assert {c for c, _, _ in judged} >= {"clocks agree", "after the clock", "too exact",
                                         "too coarse", "GFLOP/s under the peak"}
    over = [j for j in judged if j[1] >= 1.0]
    assert not over, over


def test_the_clocks_pass_at_their_worst_and_fail_just_past_it() -> None:
    margin, record, clock = worst("after the clock")
    audit.assert_after_fits(clock, where="honest")
    pushed = replace(clock, after_s=audit.after_allowed(clock) * 1.01)
    with pytest.raises(AssertionError, match="work was moved after the clock"):
        audit.assert_after_fits(pushed, where="pushed")
    margin, record, clock = worst("clocks agree")
    audit.assert_clocks_agree(clock, where="honest")
    with pytest.raises(AssertionError, match="the worker's clock disagrees"):
        audit.assert_clocks_agree(replace(clock, worker_s=audit.clock_floor(clock) * 0.99,
                                          timed_s=0.0), where="pushed")


def test_the_precision_statistics_pass_at_their_worst_and_fail_just_past_them() -> None:
    _, _, entry = worst("too exact")
    found = Statistic(entry["elements"], entry["exact"], entry["error"])
    arithmetic.assert_not_more_exact(found, "float32", None, where="honest")
    with pytest.raises(AssertionError, match="ran in float64"):
        arithmetic.assert_not_more_exact(Statistic(found.elements, arithmetic.EXACT, 0.4),
                                         "float32", None, where="pushed")
    _, _, entry = worst("too coarse")
    arithmetic.assert_not_coarser(Statistic(entry["elements"], entry["exact"], entry["error"]),
                                  "float32", where="honest")
    with pytest.raises(AssertionError, match="lower precision"):
        arithmetic.assert_not_coarser(Statistic(entry["elements"], 0.0,
                                                arithmetic.COARSE["float32"] * 1.01),
                                      "float32", where="pushed")


def test_gflops_pass_at_their_worst_and_fail_just_past_the_peak() -> None:
    best = max(records(), key=lambda r: r["measure"]["gflops"] / r["measure"]["peak_gflops"])
    measure = best["measure"]
    assert_plausible(measure["gflops"], measure["peak_gflops"], margin=PLAUSIBLE_MARGIN)
    with pytest.raises(AssertionError, match="physically implausible"):
        assert_plausible(measure["peak_gflops"] * (1 + PLAUSIBLE_MARGIN) * 1.01,
                         measure["peak_gflops"], margin=PLAUSIBLE_MARGIN)


# the geometric mean of error over float32 at its most precise's, over the seeded start's
# points (tools/precision_sweep.py --probes 8, docs/MEASURING.md): honest code's lowest and the
# float64-forward cheater's highest
HONEST_LOWEST = [("softmaxag autograd-eager smoke seed 8", 1.30),
                 ("mlp autograd-eager smoke seed 0", 2.51)]
CHEATER_HIGHEST = [("f64fwd torch-eager smoke", 1.07)]
IDEAL = Statistic(16512, 0.39, 0.97)


@pytest.mark.parametrize(("where", "ratio"), HONEST_LOWEST)
def test_the_most_precise_honest_float32_passes_too_precise(where: str, ratio: float) -> None:
    points = [(Statistic(16512, 0.2, ratio * IDEAL.error), IDEAL)] * arithmetic.PRECISE_POINTS
    assert arithmetic.assert_not_more_precise(points, "float32", where=where)["judged"]


@pytest.mark.parametrize(("where", "ratio"), CHEATER_HIGHEST)
def test_a_float64_forward_at_its_most_honest_looking_fails_too_precise(where: str,
                                                                       ratio: float) -> None:
    points = [(Statistic(16512, 0.4, ratio * IDEAL.error), IDEAL)] * arithmetic.PRECISE_POINTS
    with pytest.raises(AssertionError, match="part of the arithmetic ran in float64"):
        arithmetic.assert_not_more_precise(points, "float32", where=where)


def test_a_saved_runs_clocks_read_back_as_they_were_written() -> None:
    """audit.Clock is what the checks read; a saved run keeps it under the keys it always had,
    and every pass's entry of the committed baseline reads back to the same entry, key order
    and types (``after_bounded`` as 1.0 or 0.0) included."""
    for record in records():
        for entry in record["checks"]["clocks"]:
            back = audit.Clock.from_record(entry).to_record()
            assert back == entry and list(back) == list(entry), (back, entry)
            assert [type(v) for v in back.values()] == [type(v) for v in entry.values()]
    fresh = audit.Clock(turns=2, commands=6, after_bounded=True, not_judged="why").to_record()
    assert fresh["after_bounded"] == 1.0 and "round_median_s" not in fresh
    assert audit.Clock.from_record({"parent_s": 1.0, "worker_s": 1.0, "timed_s": 0.5,
                                    "turns": 3}).commands == 3  # before ``commands`` was kept
