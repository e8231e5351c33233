"""The compile cache kept across runs, without a session: which caches each pass reads, what a
compile figure came from, what the folder remembers (cold.json), how the record carries it,
and the named jobs' markers and estimate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_mlbench import jobs
from pytest_mlbench.measuring.cache_plan import CachePlan
from pytest_mlbench.measuring.outcome import CaseState
from pytest_mlbench.measuring.plan import Lane, Side
from pytest_mlbench.storing import cold_compiles, compile_cache
from pytest_mlbench.storing.record import Record, RecordError
from pytest_mlbench.workloads import catalogue
from pytest_mlbench.workloads.case import CaseId

SUITES = Path(__file__).resolve().parents[3] / "suites"


def _cases(*variants: tuple[str, str]) -> tuple[Lane, list[CaseId]]:
    workload = catalogue.load_workload(SUITES / "mlp")
    cases = [CaseId(workload, workload.sizes["smoke"][0], workload.all_tasks[0], fw, v, "cpu",
                    "fp32") for fw, v in variants]
    return Lane(Side(), catalogue.Catalogue(SUITES, (workload,)), tuple(cases)), cases


def test_jax_loads_in_every_pass_only_once_every_case_of_it_was_compiled_there(
        tmp_path: Path) -> None:
    """First run: JAX's processes all compile (the first pass into a folder of the session,
    added to the kept one after it); the next run, every case filled, all of them load."""
    lane, cases = _cases(("jax", "jit"), ("torch", "jit"))
    lines: list[str] = []
    first = CachePlan(str(tmp_path), "/session", True, lines.append)
    first.open([lane])
    assert first.warm == {"jax": False} and first.kept() == str(tmp_path)
    assert [first.xla(p) for p in (0, 1)] == [{"jax": "/session/xla-fill"}, {"jax": ""}]
    assert lines == [f"mlbench: compile cache {tmp_path}: 0 of 2 case(s) compiled there "
                     "before (jax compiles in every process this run, kept for the next)"]
    states = [CaseState(cid, lane, compile_s=2.5, compiled_from="cold") for cid in cases]
    first.close(states)
    second = CachePlan(str(tmp_path), "/session", True)
    second.open([lane])
    assert second.warm == {"jax": True}
    assert [second.xla(p) for p in (0, 1)] == [{"jax": str(tmp_path)}] * 2
    assert second.judged(cases[0], (3, 0)) == "cache"
    assert second.judged(cases[0], (3, 1)) == "cold"  # one compiled afresh: not all loaded
    assert second.judged(cases[1], None) == "cold"  # an adapter that keeps no count
    state = CaseState(cases[0], lane, compile_s=0.1, compiled_from="cache")
    second.close([state])
    assert state.cold_compile_s == 2.5  # the first run's figure, beside the cached one


def test_a_cold_session_keeps_nothing_and_a_check_only_one_reads_every_cache(
        tmp_path: Path) -> None:
    lane, cases = _cases(("jax", "jit"), ("numpy", "eager"))
    cold = CachePlan(compile_cache.COLD, "/session", True)
    cold.open([lane])
    assert (cold.kept(), cold.xla(0), cold.judged(cases[0], (5, 0))) == ("", {}, "cold")
    assert cold.judged(cases[1], None) == ""  # eager: compiles nothing of its own
    checked = CachePlan(str(tmp_path), "/session", False)
    checked.open([lane])
    assert checked.xla(0) == {"jax": str(tmp_path), "tensorflow": str(tmp_path)}


def test_a_cache_overwritten_with_garbage_is_named_and_set_aside_before_the_run(
        tmp_path: Path) -> None:
    """numba would raise UnpicklingError from its cache inside the case; the campaign finds
    the file before its workers start, says so in one line, moves the folder aside, and
    forgets what the folder held of numba (its cases compile afresh, cold)."""
    lane, cases = _cases(("numba", "jit"))
    broken = tmp_path / "numba" / "mlp_0123"
    broken.mkdir(parents=True)
    (broken / "impl_numba.forward_backward-10.py311.nbi").write_bytes(b"\xffgarbage")
    cold_compiles.Ledger(str(tmp_path), {"mlp": {"framework": "numba", "filled": "x"}}).save()
    lines: list[str] = []
    plan = CachePlan(str(tmp_path), "/session", True, lines.append)
    plan.open([lane])
    assert lines[0].startswith(f"mlbench: the compile cache's numba folder {tmp_path}/numba "
                               "held a file numba cannot read (mlp_0123/impl_numba."
                               "forward_backward-10.py311.nbi: not a pickle (")
    assert lines[0].endswith("; its cases compile afresh") and "set-aside/numba-" in lines[0]
    assert not (tmp_path / "numba").exists() and plan.ledger is not None
    assert not plan.ledger.filled("mlp", "x")


def test_the_ledger_keeps_cold_figures_per_version_and_survives_a_broken_file(
        tmp_path: Path) -> None:
    ledger, line = cold_compiles.Ledger.load(str(tmp_path))
    assert line == "" and ledger.entries == {}
    ledger.note("a d=1", "numba", "fill", 1.25)
    ledger.save()
    again, _ = cold_compiles.Ledger.load(str(tmp_path))
    assert again.cold_s("a d=1", "numba") == 1.25 and again.filled("a d=1", "fill")
    entry = json.loads((tmp_path / "cold.json").read_text())["cases"]["a d=1"]
    assert entry["versions"]["numba"] == cold_compiles.versions("numba")["numba"]
    (tmp_path / "cold.json").write_text("{garbage")
    broken, line = cold_compiles.Ledger.load(str(tmp_path))
    assert broken.entries == {} and "cold.json" in line and "set aside as" in line
    assert not (tmp_path / "cold.json").exists()


def test_the_record_says_what_its_compile_figure_came_from() -> None:
    from pytest_mlbench.reporting.normalised import compile_cell
    from tests.synthetic import identity, measure

    made = Record(identity("jax-jit"), "mlp-jax-jit-cpu-fp32", measure(1e-3, compile_s=0.2))
    data = made.to_json()
    assert data["measure"]["compiled_from"] == ""  # not said: records from before were cold
    data["measure"].update(compiled_from="cache", cold_compile_s=4.5)
    back = Record.from_json(data)
    assert back.measure is not None
    assert (back.measure.compiled_from, back.measure.cold_compile_s) == ("cache", 4.5)
    assert compile_cell(back.measure) == "0.200 cached, cold 4.500"
    assert compile_cell(made.measure) == "0.200"  # type: ignore[arg-type]
    data["measure"]["compiled_from"] = "warm"
    with pytest.raises(RecordError, match="^'compiled_from' must be one of 'cold', 'cache', ''"):
        Record.from_json(data)


def test_the_jobs_split_the_headline_by_what_they_answer() -> None:
    """The main job: plain modes, one worker; the idioms beside their plain modes; the
    parallel layouts beside the one-worker cases they scale from."""
    gpt = catalogue.load_workload(SUITES / "gpt")
    shape, task = gpt.sizes["default"][0], gpt.all_tasks[0]

    def case(fw: str, variant: str, workers: int = 1, strategy: str = "") -> list[str]:
        return jobs.markers(CaseId(gpt, shape, task, fw, variant, "cpu", "fp32", workers,
                                   strategy))

    assert case("torch", "eager") == [jobs.MAIN, jobs.IDIOMS, jobs.SCALE]  # fsdp's w1 base
    assert case("torch", "jit") == [jobs.MAIN, jobs.IDIOMS]  # no layout of its own
    assert case("torch", "jit+sdpa") == [jobs.IDIOMS]
    assert case("torch", "eager", 2, "fsdp") == [jobs.SCALE]
    assert jobs.estimate(10, 0, 3, 7.8) == pytest.approx(2 * jobs.estimate(10, 0, 3, 3.9))
    assert jobs.estimate(10, 10, 3, 3.9) < jobs.estimate(10, 0, 3, 3.9)


def test_the_cache_command_says_what_the_folder_holds_and_clears_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_mlbench import cli

    folder = tmp_path / "compile"
    compile_cache.prepare(str(folder))  # as a session makes it: with the plugin's mark
    (folder / "numba" / "impl").mkdir(parents=True)
    (folder / "numba" / "impl" / "f.nbi").write_bytes(b"12345")
    assert cli.main(["cache", "--compile-cache", str(folder)]) == 0
    assert "  numba      numba/     1 file(s), 0.0 MB" in capsys.readouterr().out
    assert cli.main(["cache", "clear", "--compile-cache", str(folder)]) == 0
    assert not folder.exists() and "cleared" in capsys.readouterr().out
