"""The --mlbench-save and --mlbench-gate sessions in real pytest runs (pytester), over plain
``benchmark`` tests that carry synthetic Records: verdicts never depend on the machine's speed,
and nothing here needs the case engine or the suites."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pytest_mlbench
from pytest_mlbench.judging import sessions
from pytest_mlbench.storing.record import Record
from tests.synthetic import (
    MACHINE,
    PLUGIN_ARGS,
    bench,
    fullname,
    record,
    run_json,
    session_files,
    write,
)
from tests.unit.storing import test_runs

FAST, SLOW = record("jax-jit", 1e-3), record("numpy-eager", 2e-3)
FAILING = "\ndef test_broken():\n    assert False\n"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    quiet = () if "no:benchmark" in args else ("--benchmark-columns=median",)
    return pytester.runpytest(*PLUGIN_ARGS, *quiet, *args)


def esc(text: str) -> str:
    """fnmatch reads [...] as a character class: test ids need theirs escaped."""
    return text.replace("[", "[[]")


def last_line(result: pytest.RunResult) -> str:
    """The session's last line without its rule and its seconds: ``1 failed, 1 passed``."""
    line = result.outlines[-1].strip("= ")
    assert " in " in line, result.outlines[-1]
    return line.rsplit(" in ", 1)[0]


def saved(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.json"))


def baseline_of(pytester: pytest.Pytester, *records: Record, **kw: object) -> Path:
    """A baseline file holding ``records`` under the ids test_cases.py gives them."""
    kw.setdefault("machine", sessions.current_machine_info()["mlbench"])  # no differences
    run_ = run_json(*[bench(r, fullname(r)) for r in records], **kw)  # type: ignore[arg-type]
    return write(pytester.path / "base.json", run_)


# -- saving -------------------------------------------------------------------------------------

def test_save_round_trip(pytester: pytest.Pytester) -> None:
    session_files(pytester.path, FAST, SLOW)
    result = run(pytester, "--mlbench-save=main", "--mlbench-baselines=bl")
    assert result.ret == 0
    (path,) = saved(pytester.path / "bl")
    result.stdout.fnmatch_lines([f"mlbench: saved baseline {path}"])
    data = json.loads(path.read_text())
    assert path.name == "0001_main.json" and data["mlbench"]["partial"] is False
    assert data["machine_info"]["mlbench"]["cpu"]["model"]
    got = {b["fullname"]: Record.from_benchmark(b) for b in data["benchmarks"]}
    assert got == {fullname(FAST): FAST, fullname(SLOW): SLOW}


@pytest.mark.parametrize("extra", [(), ("-x",)])
def test_a_failed_session_does_not_save(pytester: pytest.Pytester, extra: tuple[str, ...]) -> None:
    session_files(pytester.path, FAST)
    with (pytester.path / "test_cases.py").open("a") as fh:
        fh.write(FAILING)
    result = run(pytester, "--mlbench-save=main", "--mlbench-baselines=bl", *extra)
    assert result.ret == pytest.ExitCode.TESTS_FAILED and not saved(pytester.path / "bl")
    result.stdout.fnmatch_lines(["mlbench: baseline not saved: the session did not complete "
                                 "(tests failed or errored); pass --mlbench-save-partial to "
                                 "keep it as a partial run"])


def test_save_partial_marks_the_run_and_replaces_nothing(pytester: pytest.Pytester) -> None:
    session_files(pytester.path, FAST)
    assert run(pytester, "--mlbench-save=main", "--mlbench-baselines=bl").ret == 0
    (whole,) = saved(pytester.path / "bl")
    before = whole.read_bytes()
    with (pytester.path / "test_cases.py").open("a") as fh:
        fh.write(FAILING)
    result = run(pytester, "--mlbench-save=main", "--mlbench-baselines=bl",
                 "--mlbench-save-mode=overwrite", "--mlbench-save-partial")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    part = whole.with_name("0002_main.partial.json")
    result.stdout.fnmatch_lines([f"mlbench: saved partial run (tests failed or errored) {part}"])
    assert whole.read_bytes() == before and saved(pytester.path / "bl") == [whole, part]
    assert json.loads(part.read_text())["mlbench"] == {
        "partial": True, "exitstatus": 1, "incomplete": "tests failed or errored",
        "version": pytest_mlbench.__version__}


SLEEPER = """
import json, pathlib, time, pytest

RECORDS = json.loads((pathlib.Path(__file__).parent / "records.json").read_text())

def test_a_first(benchmark):
    benchmark.extra_info["mlbench"] = RECORDS[sorted(RECORDS)[0]]
    benchmark.pedantic(lambda: None, rounds=3, iterations=1)

def test_b_long(benchmark):
    (pathlib.Path(__file__).parent / "started").touch()
    def wait():
        for _ in range(600):
            time.sleep(0.1)
    benchmark.pedantic(wait, rounds=1, iterations=1)
"""


def interrupted(pytester: pytest.Pytester, *args: str) -> subprocess.CompletedProcess[str]:
    """A real pytest process, SIGINT once its second benchmark is running."""
    (pytester.path / "test_cases.py").write_text(SLEEPER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    # SIGINT back to its default first: a shell's background job (``pytest ... &``) starts with
    # it ignored, and a Python started so never raises KeyboardInterrupt
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *PLUGIN_ARGS, *args],
                            cwd=pytester.path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not (pytester.path / "started").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=120)[0]
    (pytester.path / "started").unlink()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out)


def test_ctrl_c_in_a_saving_run_saves_nothing_and_replaces_nothing(
        pytester: pytest.Pytester) -> None:
    session_files(pytester.path, FAST)
    assert run(pytester, "--mlbench-save=main", "--mlbench-baselines=bl").ret == 0
    (whole,) = saved(pytester.path / "bl")
    before = whole.read_bytes()
    done = interrupted(pytester, "--mlbench-save=main", "--mlbench-baselines=bl",
                       "--mlbench-save-mode=overwrite")
    assert done.returncode == pytest.ExitCode.INTERRUPTED, done.stdout
    assert "mlbench: baseline not saved: the session did not complete (interrupted)" in done.stdout
    assert saved(pytester.path / "bl") == [whole] and whole.read_bytes() == before


def test_ctrl_c_with_save_partial_keeps_a_marked_partial_run(pytester: pytest.Pytester) -> None:
    session_files(pytester.path, FAST)
    done = interrupted(pytester, "--mlbench-save=main", "--mlbench-baselines=bl",
                       "--mlbench-save-partial")
    assert done.returncode == pytest.ExitCode.INTERRUPTED, done.stdout
    (part,) = saved(pytester.path / "bl")
    assert part.name == "0001_main.partial.json", done.stdout
    data = json.loads(part.read_text())
    assert data["mlbench"]["partial"] is True and data["mlbench"]["incomplete"] == "interrupted"
    assert [b["name"] for b in data["benchmarks"]] == ["test_a_first"]
    # a gate given the name alone refuses it; named explicitly, it is used and flagged
    refused = run(pytester, "--mlbench-gate=main", "--mlbench-baselines=bl")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["ERROR: --mlbench-gate: *0001_main.partial.json: only partial "
                                  "runs of 'main'*name it main.partial or by path*"])
    session_files(pytester.path, FAST)
    used = run(pytester, "--mlbench-gate=main.partial", "--mlbench-baselines=bl")
    used.stdout.fnmatch_lines([f"baseline {part} is a partial run*"])


# -- refused before any test runs ---------------------------------------------------------------

MARK = """
import pathlib
def test_marks(benchmark):
    (pathlib.Path(__file__).parent / "ran").touch()
    benchmark.pedantic(lambda: None, rounds=3)  # a few rounds: these tests judge no time
"""


@pytest.mark.parametrize(("setup", "args", "message"), [
    ("", ("--mlbench-baselines=nowhere/bl",), "*nowhere/bl: baselines folder missing, and so "
                                               "is its parent*"),
    ("file", ("--mlbench-baselines=bl",), "*bl: is a file, not a baselines folder"),
    ("", ("--mlbench-baselines=bl", "--mlbench-save=" + "n" * 250),
     "*file name too long for this filesystem*"),
    ("", ("--mlbench-save=main.partial",), "*names may not end in '.partial'*"),
    ("saved", ("--mlbench-baselines=bl",), "*0001_main.json: baseline 'main' exists; pass "
                                           "--mlbench-save-mode=overwrite*"),
])
def test_save_problems_are_refused_before_the_run(pytester: pytest.Pytester, setup: str,
                                                  args: tuple[str, ...], message: str) -> None:
    pytester.makepyfile(test_marks=MARK)
    if setup == "file":
        (pytester.path / "bl").write_text("")
    if setup == "saved":
        assert run(pytester, "--mlbench-save=main", "--mlbench-baselines=bl").ret == 0
        (pytester.path / "ran").unlink()
    result = run(pytester, "--mlbench-save=main", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: --mlbench-save: "), errors
    result.stderr.fnmatch_lines([message])
    assert not (pytester.path / "ran").exists()


FAKE_XDIST = """
def pytest_addoption(parser):
    parser.addoption("--dist", default="no")
"""


@pytest.mark.parametrize("flag", ["--mlbench-save=main", "--mlbench-gate=base.json"])
@pytest.mark.parametrize(("args", "message"), [
    (("--benchmark-disable",), "--benchmark-disable turns timing off*"),
    (("--benchmark-skip",), "--benchmark-skip skips every benchmark*"),
    (("-p", "fake_xdist", "--dist=load"), "pytest-xdist is active (-n/--dist)*"),
    (("-p", "no:benchmark"), "pytest-benchmark is disabled (-p no:benchmark)*"),
])
def test_sessions_that_cannot_time_are_refused(pytester: pytest.Pytester, flag: str,
                                               args: tuple[str, ...], message: str) -> None:
    pytester.makepyfile(test_marks=MARK, fake_xdist=FAKE_XDIST)
    pytester.syspathinsert()
    baseline_of(pytester, FAST)
    result = run(pytester, flag, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {flag.split('=')[0]}: refused: {message}"])
    assert not (pytester.path / "ran").exists()


def test_a_xdist_worker_is_refused(pytester: pytest.Pytester,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    pytester.makepyfile(test_marks=MARK)
    result = run(pytester, "--mlbench-save=main")
    result.stderr.fnmatch_lines(["ERROR: --mlbench-save: refused: pytest-xdist is active*"])


# -- the gate -----------------------------------------------------------------------------------

def test_gate_passes_when_nothing_changed(pytester: pytest.Pytester) -> None:
    session_files(pytester.path, FAST, SLOW)
    base = baseline_of(pytester, FAST, SLOW)
    result = run(pytester, f"--mlbench-gate={base}")
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"*mlbench gate against {base} (seconds per step)*",
                                 "benchmark * baseline (ms) * current (ms) * change *verdict",
                                 esc("test_case[mlp-jax-jit-cpu-fp32] * no significant change"),
                                 "mlbench gate: passed (2 judged, none significantly slower)"])
    assert last_line(result) == "2 passed"  # a passed gate counts nowhere


def test_gate_fails_on_a_slowdown_beyond_the_threshold(pytester: pytest.Pytester) -> None:
    session_files(pytester.path, record("jax-jit", 1.5e-3, measure_kw={"seed": 9}))
    base = baseline_of(pytester, FAST)
    result = run(pytester, f"--mlbench-gate={base}", "--mlbench-gate-threshold=20%", "-x")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([esc("test_case[mlp-jax-jit-cpu-fp32] * 20% * 5/5  SLOWER"),
                                 esc("mlbench gate: FAILED: 1 of 1 judged benchmarks slower: "
                                     "test_case[mlp-jax-jit-cpu-fp32] +49.6% (p=*"),
                                 "*short test summary info*",
                                 esc("FAILED mlbench gate - 1 of 1 judged benchmarks slower: "
                                     "test_case[mlp-jax-*")])  # cut to the terminal's width
    # the verdict is the session's last line, in pytest's own words; -x stops nothing after it
    assert last_line(result) == "1 failed, 1 passed"
    assert "stopping after" not in result.stdout.str()


def test_gate_on_another_size_judges_nothing_and_fails(pytester: pytest.Pytester) -> None:
    small = record("jax-jit", 1e-5, dims={"batch": 8, "d": 4})
    session_files(pytester.path, small)
    base = baseline_of(pytester, FAST)
    result = run(pytester, f"--mlbench-gate={base}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([esc("test_case[mlp-jax-jit-cpu-fp32] * not comparable: dims: "
                                     "{'batch': 64, 'd': 32} -> {'batch': 8, 'd': 4}"),
                                 "mlbench gate: nothing judged: 1 not comparable"])


@pytest.mark.parametrize(("module", "why"), [
    ("def test_nothing():\n    pass\n", "no mlbench case ran"),
    ("def test_plain(benchmark):\n    benchmark(lambda: None)\n",
     "no mlbench case ran (1 plain benchmarks without an mlbench record)"),
])
def test_gate_with_no_case_fails(pytester: pytest.Pytester, module: str, why: str) -> None:
    pytester.makepyfile(test_other=module)
    base = baseline_of(pytester, FAST)
    result = run(pytester, f"--mlbench-gate={base}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"mlbench gate: nothing judged: {why}",
                                 "FAILED mlbench gate - nothing judged: no mlbench case ran*"])
    assert last_line(result) == "1 failed, 1 passed"


def test_gate_lists_machine_differences(pytester: pytest.Pytester) -> None:
    session_files(pytester.path, FAST)
    other = {**MACHINE, "cpu": {**MACHINE["cpu"], "model": "Other CPU"},
             "packages": {"numpy": "1.0.0"}}
    base = baseline_of(pytester, FAST, machine=other)
    result = run(pytester, f"--mlbench-gate={base}")
    result.stdout.fnmatch_lines(["machine differs: cpu.model: Other CPU -> *",
                                 "machine differs: version.numpy: 1.0.0 -> *"])


def test_marker_thresholds(pytester: pytest.Pytester) -> None:
    session_files(pytester.path, record("jax-jit", 1.5e-3, measure_kw={"seed": 9}))
    text = (pytester.path / "test_cases.py").read_text()
    (pytester.path / "test_cases.py").write_text(text.replace(
        "def test_case", "@pytest.mark.mlbench_gate(threshold='80%')\ndef test_case"))
    base = baseline_of(pytester, FAST)
    result = run(pytester, f"--mlbench-gate={base}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["test_case* 80% * slower, within threshold"])
    (pytester.path / "test_cases.py").write_text(text.replace(
        "def test_case", "@pytest.mark.mlbench_gate(threshold='lots')\ndef test_case"))
    result = run(pytester, f"--mlbench-gate={base}")
    result.assert_outcomes(errors=1, failed=1)  # the error, and the gate that judged nothing
    result.stdout.fnmatch_lines(["*@pytest.mark.mlbench_gate(threshold=...): 'lots' has no '%'*"])


@pytest.mark.parametrize("kind", sorted(test_runs.BAD))
def test_bad_baselines_are_one_line_usage_errors(pytester: pytest.Pytester, kind: str) -> None:
    content, message = test_runs.BAD[kind]
    path = pytester.path / f"{kind}.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    pytester.makepyfile(test_marks=MARK)
    result = run(pytester, f"--mlbench-gate={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: --mlbench-gate: {path}: "), errors
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "ran").exists()


def test_the_installed_plugin_registers_these_sessions(pytester: pytest.Pytester) -> None:
    """plugin.py's pytest_configure hands its GateSettings to ``register`` (the tests above
    load the stand-in tests/session_plugin.py instead, to stay clear of the case engine)."""
    pytester.makepyfile(test_marks=MARK)
    result = pytester.runpytest("--mlbench-gate=nothere.json", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --mlbench-gate: nothere.json: no such baseline file"])
    result = pytester.runpytest("--mlbench-save=main", "--benchmark-disable")
    result.stderr.fnmatch_lines(["ERROR: --mlbench-save: refused: --benchmark-disable*"])
