"""The judge of what a timed turn used and what its worker holds (checking/cores.py, issue 56):
each finding fails the turn in one line saying what and where; an honest turn passes and
gives its largest ratio of cores used to the case's threads."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from pytest_mlbench.checking import cores
from pytest_mlbench.engine import protocol as p

WHERE = "numpy eager (mlp-numpy-eager-cpu-fp32)"
NUMBERS = [4, 5, 6]


def ran(cpu: list[float], walls: list[float] | None = None) -> list[p.RoundRan]:
    """Rounds whose threads used ``cpu`` seconds over ``walls`` (10 ms each by default)."""
    walls = walls or [0.01] * len(cpu)
    return [p.RoundRan(seconds=w * 0.99, serial=i, digest=None, faults=0, steps=0,
                       pretouched=None, span=w, outside=0.0, cpu=c, cpu_wall=w)
            for i, (c, w) in enumerate(zip(cpu, walls, strict=True))]


def usage(**changed: Any) -> p.TurnUsage:
    quiet = p.TurnUsage(span=0.03, children_cpu=0.0, children={}, widened={}, cores=[0],
                        controls={}, set_while_timed={}, new_threads={}, new_processes={})
    return replace(quiet, **changed)


def judge(rounds: list[p.RoundRan], found: p.TurnUsage, threads: int = 1,
          device: str = "cpu") -> float:
    """One rank's turn, the last round's reply carrying the turn's ``usage``."""
    ended = [*rounds[:-1], replace(rounds[-1], usage=found)]
    return cores.assert_turn([ended], NUMBERS, threads=threads, device=device, where=WHERE)


def test_an_honest_turn_passes_with_its_largest_ratio_of_cores_to_threads() -> None:
    assert judge(ran([0.0099, 0.0100, 0.0097]), usage()) == pytest.approx(1.0)
    assert judge(ran([0.019, 0.0195, 0.018]), usage(), threads=2) == pytest.approx(0.975)


def test_a_round_on_two_cores_where_the_case_has_one_fails_saying_where() -> None:
    with pytest.raises(AssertionError, match=(
            rf"^{re.escape(WHERE)} timed turn of rounds 4-6: "
            r"round 5 used 1\.90 cores where the case has 1 thread\(s\) \(at most 1\.10 with "
            r"the margin\): 1\.90 in the worker's threads, 0\.00 in its child processes$")):
        judge(ran([0.0099, 0.019, 0.0097]), usage())


def test_child_processes_count_over_the_turn_and_are_named() -> None:
    found = usage(children_cpu=0.027, children={4242: "python"})
    with pytest.raises(AssertionError, match=r"round \d used 1\.\d\d cores .*: 0\.\d\d in the "
                                             r"worker's threads, 0\.90 in its child processes "
                                             r"\(4242 \(python\) ran\)"):
        judge(ran([0.006, 0.006, 0.006]), found)


def test_a_short_round_s_readings_are_within_the_slack() -> None:
    """A session that times nothing runs rounds of tens of microseconds: the CPU clock read
    on either side of one may exceed its wall time by a few microseconds."""
    assert judge(ran([60e-6], [40e-6]), usage()) == pytest.approx(1.5)
    with pytest.raises(AssertionError, match=r"round 4 used 2\.50 cores .* \(at most 2\.35 with"):
        judge(ran([100e-6], [40e-6]), usage())


def test_a_gpu_case_s_host_cpu_is_not_judged_but_its_controls_are() -> None:
    assert judge(ran([0.03] * 3), usage(), device="gpu") == pytest.approx(3.0)
    with pytest.raises(AssertionError, match="thread controls set while timed"):
        judge(ran([0.01] * 3), usage(set_while_timed={"torch.set_num_threads(2)": 3}),
              device="gpu")


def test_a_control_set_while_timed_fails_naming_the_call_and_the_session_s_setting() -> None:
    with pytest.raises(AssertionError, match=(
            r"timed turn of rounds 4-6: thread controls set while timed: "
            r"torch\.set_num_threads\(2\) \(40 calls\), where the session set 1 thread\(s\) on "
            r"cores \[0\]$")):
        judge(ran([0.01] * 3), usage(set_while_timed={"torch.set_num_threads(2)": 40}))


def test_a_control_changed_at_the_turn_s_end_fails_naming_both_values() -> None:
    with pytest.raises(AssertionError, match=(
            r": torch\.get_num_threads\(\) reads 2 after the turn, 1 as the session set it$")):
        judge(ran([0.01] * 3), usage(controls={"torch.get_num_threads()": (2, 1)}))


def test_a_thread_allowed_past_the_case_s_cores_fails_and_new_ones_are_named() -> None:
    found = usage(widened={"thread 77 (python)": [0, 1]}, new_threads={77: "python"},
                  new_processes={90: "python", 91: "python"})
    with pytest.raises(AssertionError, match=(
            r": thread 77 \(python\) may run on cores \[0, 1\], the case's are \[0\]; 1 "
            r"thread\(s\) held that were not when timing began: 77 \(python\); 2 child "
            r"process\(es\) held that were not when timing began: 90 \(python\), 91 \(python\)$")):
        judge(ran([0.01] * 3), found)


def test_new_threads_alone_are_no_finding() -> None:
    """Frameworks may start a thread while timed (a pool that grows on demand): named with a
    finding, never one by themselves."""
    assert judge(ran([0.01] * 3), usage(new_threads={77: "python"})) == pytest.approx(1.0)


def test_a_rank_of_a_parallel_case_is_named() -> None:
    with pytest.raises(AssertionError, match=r"\) \(rank 1\) timed turn of rounds 4-6: round"):
        cores.assert_turn([ran([0.01] * 3), ran([0.02] * 3)], NUMBERS, threads=1,
                          device="cpu", where=WHERE)


def test_a_worker_that_reports_no_cpu_is_judged_on_its_controls_only() -> None:
    """A turn with a round without its CPU readings, or without its turn's usage (its rounds'
    own CPU judged alone)."""
    rounds = ran([0.01] * 3)
    rounds[1] = replace(rounds[1], cpu=None)
    assert judge(rounds, usage()) == 0.0
    assert cores.assert_turn([ran([0.01] * 3)], NUMBERS, threads=1, device="cpu",
                             where=WHERE) == pytest.approx(1.0)


def test_at_the_end_every_control_holds_the_session_s_count_or_its_value_before_timing() -> None:
    before = {"torch.get_num_threads": 1, "torch.interop (1 by policy)": "1"}
    cores.assert_controls_kept(before, {**before, "openblas:libopenblas.so": 1}, 1, where=WHERE)
    with pytest.raises(AssertionError, match=(
            r"^numpy eager .*: thread controls changed by the end of timing: "
            r"openblas:libopenblas\.so=2 \(the session set 1\), torch\.get_num_threads=2 \(1 "
            r"before timing\), torch\.interop \(1 by policy\)=2 \(1 before timing\)$")):
        cores.assert_controls_kept(before, {"torch.get_num_threads": 2,
                                            "torch.interop (1 by policy)": "2",
                                            "openblas:libopenblas.so": 2}, 1, where=WHERE)
    # a library loaded since timing began, sized under the session's count: not accused
    cores.assert_controls_kept(before, {**before, "openmp:libgomp.so.1": 2}, 4, where=WHERE)
