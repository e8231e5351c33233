"""The host probe: a reading before every timed process pass, in the run's JSON but never in
the machine's id, under the normalised table, and across runs in tools/reproducibility.py."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest

from pytest_mlbench.measuring import hostspeed
from pytest_mlbench.storing import fingerprint
from pytest_mlbench.storing.runs import load_run
from tests.sessions.test_ab import toy

ROOT = Path(__file__).resolve().parents[3]


def reproducibility():  # the tool is a script, not a module of the package
    spec = importlib.util.spec_from_file_location("reproducibility",
                                                  ROOT / "tools" / "reproducibility.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_timed_session_reads_the_host_before_each_process_outside_the_machine_id(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The host probe of each process; the same session's records also show each process's
    heap pre-touch. Two processes: a second process is what shows a reading per process. The
    toy's step busy-waits a millisecond: each pass's references and audits replay its steps
    from the seeded start in float64, and at its bare ~0.07 ms a call a round held ~30 times
    the steps (references 4 s and audits 1 s of the session's 11 CPU-s; 4 in all now)."""
    toy(pytester, slow_s=1e-3)
    out = pytester.path / "run.json"
    result = pytester.runpytest_subprocess("suites", "-p", "no:cacheprovider",
                                           "--mlbench-size=smoke", "--mlbench-processes=2",
                                           "--benchmark-max-time=0.05",
                                           f"--benchmark-json={out}")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["host probe before each of 2 process(es): Python loop * ms "
                                 "(*-*), one-thread matmul * ms (*-*);*"])
    run = json.loads(out.read_text())
    # and each process's worker pre-touched its heap before the case's timed rounds
    # (engine/allocator.py), or says why it could not
    for bench in run["benchmarks"]:
        heaps = bench["extra_info"]["mlbench"]["environment"]["heap"]
        assert len(heaps) == 2, heaps
        assert all(h["top_mb"] >= 64 if h["pretouched"] else h["why"] for h in heaps), heaps
    info = run["machine_info"]
    probe = info["mlbench"]["host_probe"]
    assert sorted(probe) == sorted(hostspeed.PROBES)
    assert all(len(probe[name]) == 2 and min(probe[name]) > 0 for name in hostspeed.PROBES)
    bare = copy.deepcopy(info)
    del bare["mlbench"]["host_probe"]
    assert fingerprint.machine_id(info) == fingerprint.machine_id(bare)
    assert fingerprint.fingerprint(info) == fingerprint.fingerprint(bare)

    # across runs: a second run whose host ran its loop 10% slower shows it
    slower = json.loads(out.read_text())
    slower["machine_info"]["mlbench"]["host_probe"]["interpreter_ms"] = [
        v * 1.1 for v in probe["interpreter_ms"]]
    other = pytester.path / "run2.json"
    other.write_text(json.dumps(slower))
    tool = reproducibility()
    rows = tool.host_rows([load_run(out), load_run(other)])
    assert [r[0] for r in rows] == ["Python loop", "one-thread matmul", "memory walk"]
    assert rows[0][1].endswith("(+0.0%)") and rows[0][2].endswith("(+10.0%)")
    assert rows[1][2].endswith("(+0.0%)")

    # a run without a probe (an older run) leaves the comparison without the probe's rows
    del slower["machine_info"]["mlbench"]["host_probe"]
    other.write_text(json.dumps(slower))
    assert tool.host_rows([load_run(out), load_run(other)]) == []

    # and the tool says which run's host changed speed between its own processes
    kept = pytester.path / "kept"
    kept.mkdir()
    for name, loop in (("run1", [5.0, 5.1, 5.0]), ("run2", [5.0, 8.5, 5.2])):
        run["machine_info"]["mlbench"]["host_probe"] = {
            "interpreter_ms": loop, "kernel_ms": [1.0, 1.0, 1.0], "memory_ms": [3.0, 3.1, 3.0]}
        (kept / f"{name}.json").write_text(json.dumps(run))
    monkeypatch.setattr("sys.argv", ["reproducibility.py", "--read", str(kept)])
    capsys.readouterr()  # the session's own output above may carry its host's note
    tool.main()
    said = [line for line in capsys.readouterr().out.splitlines() if "changed speed" in line]
    assert said == ["  run 2: the host changed speed during this run (Python loop 70% slower in "
                    "its slowest process than its fastest): a repeat run's ratios may not hold"]


@pytest.mark.parametrize("probe", [{}, {"interpreter_ms": []}, {"interpreter_ms": ["x", None]},
                                   {"kernel_ms": "fast"}, {"memory_ms": 3.0}])
def test_a_missing_or_malformed_probe_reads_as_none(probe: dict) -> None:
    assert hostspeed.summary(probe) == {} and hostspeed.line(probe) is None


@pytest.mark.parametrize("info", [{}, {"mlbench": None}, {"mlbench": {"host_probe": [1, 2]}},
                                  None])
def test_a_run_without_a_probe_has_none(info: object) -> None:
    assert hostspeed.of_run(info) == {}  # type: ignore[arg-type]


def test_the_line_counts_the_passes_of_whichever_probes_the_run_has() -> None:
    """An older run recorded two probes, a newer three; one with only some is still read."""
    line = hostspeed.line({"kernel_ms": [1.0, 1.5, 1.25], "memory_ms": [2.0, "x"]})
    assert line is not None and "each of 3 process(es)" in line
    assert "one-thread matmul 1.25 ms (1.00-1.50)" in line and "memory walk 2.00 ms" in line
    assert "Python loop" not in line


@pytest.mark.parametrize(("probe", "says"), [
    # run 1 of the cc2f826 set: the Python loop 68% slower in two passes than in the third
    ({"interpreter_ms": [11.13, 6.61, 11.06], "kernel_ms": [1.89, 1.42, 1.84]},
     "Python loop 68% slower"),
    # the largest swing is the one named, whichever probe it is
    ({"interpreter_ms": [7.0, 7.2, 7.1], "memory_ms": [3.0, 5.4, 4.0]}, "memory walk 80% slower"),
    ({"kernel_ms": [1.0, 1.26]}, "one-thread matmul 26% slower"),
])
def test_a_host_that_changed_speed_within_the_run_is_said_to_have(probe: dict,
                                                                   says: str) -> None:
    line = hostspeed.line(probe)
    assert line is not None and f"the host changed speed during this run ({says} in its " \
        "slowest process than its fastest): a repeat run's ratios may not hold" in line


@pytest.mark.parametrize("probe", [
    {"interpreter_ms": [6.90, 7.22, 7.09], "kernel_ms": [1.36, 1.38, 1.42]},  # a quiet hour
    {"kernel_ms": [1.0, 1.25]},  # at the limit
    {"memory_ms": [4.0]},  # one process: nothing to compare
    {"interpreter_ms": [0.0, 5.0]},  # a reading of nothing is not a swing
])
def test_a_steady_host_gets_no_note(probe: dict) -> None:
    line = hostspeed.line(probe)
    assert line is not None and "changed speed" not in line


def test_the_memory_walk_visits_every_slot_before_it_repeats() -> None:
    """Hull-Dobell: x -> a x + c modulo a power of two has full period iff c is odd and
    a = 1 (mod 4); a shorter cycle could settle in the caches and measure nothing."""
    assert hostspeed.WALK_C % 2 == 1 and hostspeed.WALK_A % 4 == 1
    n, a, c, seen, here = 1 << 12, hostspeed.WALK_A % (1 << 12), hostspeed.WALK_C % (1 << 12), \
        set(), 0
    for _ in range(n):
        seen.add(here)
        here = (a * here + c) % n
    assert len(seen) == n and here == 0


def test_the_probe_reads_every_kind_of_work() -> None:
    found = hostspeed.measure(repeats=1)
    assert sorted(found) == sorted(hostspeed.PROBES) and all(v > 0 for v in found.values())
    assert hostspeed.summary({k: [v] for k, v in found.items()}) == {
        k: (v, v, v) for k, v in found.items()}


@pytest.mark.parametrize("runs", ["1", "0", "-3"])
def test_the_reproducibility_tool_refuses_fewer_than_two_runs_in_one_line(
        runs: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    tool = reproducibility()
    monkeypatch.setattr("sys.argv", ["reproducibility.py", "--runs", runs])
    with pytest.raises(SystemExit) as exited:
        tool.main()
    err = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2
    assert err[-1].endswith(f"--runs {runs}: at least 2 runs are needed to compare")


def test_a_host_that_ran_at_another_speed_between_runs_is_named() -> None:
    """tools/reproducibility.py's note under the host table: the probe's median moved by more
    than HOST_SWING from run 1 (the 2026-11-25 set: the memory walk 76% slower in run 2)."""
    first = {"interpreter_ms": [4.0, 4.1, 4.0], "memory_ms": [2.0, 2.1, 2.0]}
    assert hostspeed.drift(first, {"interpreter_ms": [4.2, 4.3, 4.2],
                                   "memory_ms": [3.5, 3.6, 3.5]}) == (
        "the host ran at another speed than in run 1 (memory walk 75% slower): ratios of "
        "dispatch-bound implementations move with it")
    assert "(Python loop 50% faster)" in hostspeed.drift(first, {"interpreter_ms": [2.0] * 3})
    assert hostspeed.drift(first, {"interpreter_ms": [4.4] * 3, "memory_ms": [2.2] * 3}) == ""
    assert hostspeed.drift(first, {}) == "" and hostspeed.drift({}, first) == ""
