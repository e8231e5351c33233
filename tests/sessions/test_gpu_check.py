"""tools/gpu_check.sh, the GPU check a borrowed machine runs (docs/GPU.md), run here on the CPU
in its quick mode: it passes and writes its files; the same run asked for a GPU on a machine
without one fails, saying what is missing, and a session asked for a GPU there skips every
case with its framework's reason (no error); its judge (tools/gpu_check.py summary) fails a
failed case and a session cut by its timeout; its install refuses a missing wheels folder in
one line and installs by hand where the interpreter has no pip. 35-70 s of the test line on
a 2-core host (more under heavy load), mostly the quick CPU run."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests import background
from tests.background import Command

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "gpu_check.sh"
spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
assert spec is not None and spec.loader is not None
gpu_check = importlib.util.module_from_spec(spec)
sys.modules["gpu_check"] = gpu_check
spec.loader.exec_module(gpu_check)

needs_frameworks = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "jax"))
    or shutil.which("bash") is None or shutil.which("timeout") is None,
    reason="the quick run needs torch, jax, bash and coreutils' timeout")


@background.session("quick_cpu_run")
def quick_cpu_command(folder: Path) -> Command:
    """The quick CPU run, in the background (tests/background.py)."""
    return Command(["--device=cpu", "--quick", "--out", str(folder)], ROOT, timed=True,
                   env={"PYTHON": sys.executable}, program=("bash", str(SCRIPT)))


@pytest.fixture
def quick_cpu_run(tmp_path_factory: pytest.TempPathFactory) -> background.Done:
    return background.result("quick_cpu_run", tmp_path_factory)


@needs_frameworks
def test_the_quick_cpu_run_passes_and_writes_its_files(quick_cpu_run: background.Done) -> None:
    rc, out, tmp_path = quick_cpu_run.returncode, quick_cpu_run.output, quick_cpu_run.folder
    assert rc == 0, out
    assert {p.name for p in tmp_path.iterdir()} == {
        "gpu_check.log", "environment.json", "summary.json", "timed.json", "junit.tar.gz"}
    assert "summary: passed (cpu)" in (tmp_path / "gpu_check.log").read_text()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["problems"] == []
    checked = summary["sessions"]["checked-fp32-tf32"]
    assert checked["counts"] == {"passed": 2, "skipped": 2}, checked
    assert checked["skip_reasons"] == ["2 x tf32 applies to NVIDIA GPUs only"]
    assert summary["groups"][0].startswith("mlbench [process 1/1] mlp cpu fp32: 1 case(s) "
                                           "checked and timed in"), summary["groups"]
    timed = json.loads((tmp_path / "timed.json").read_text())
    [bench] = timed["benchmarks"]
    assert bench["name"] == "test_case[mlp-torch-eager-cpu-fp32]"
    assert bench["extra_info"]["mlbench"]["identity"]["device"] == "cpu"
    environment = json.loads((tmp_path / "environment.json").read_text())
    assert environment["pytest_mlbench"].startswith(str(ROOT)), environment  # the tree's code


# the GPU run and the GPU session on this machine without a GPU, in the background too: each
# starts torch and JAX (5-9 s of the test line's main thread each, waiting)
NO_GPU_SESSION = ["suites", "-m", "mlbench_main", "-k", "mlp-torch-eager- or mlp-jax-jit-",
                  "--mlbench-device=gpu", "--mlbench-precision=fp32,tf32",
                  "--mlbench-frameworks=torch,jax", "--mlbench-workers=1", "--benchmark-disable",
                  "--mlbench-size=smoke", "--mlbench-threads=1", "-rs", "-p", "no:cacheprovider"]


def _unless_skipped(command: Command) -> Command:
    """``command``, or nothing where needs_frameworks skips the tests that read it."""
    if needs_frameworks.args[0]:
        return Command([], ROOT, program=(sys.executable, "-c", "pass"))
    return command


@background.session("gpu_run_without_gpu")
def gpu_run_without_gpu_command(folder: Path) -> Command:
    return _unless_skipped(Command(["--device=gpu", "--quick", "--out", str(folder)], ROOT,
                                   env={"PYTHON": sys.executable}, program=("bash", str(SCRIPT))))


@pytest.fixture
def gpu_run_without_gpu(tmp_path_factory: pytest.TempPathFactory) -> background.Done:
    return background.result("gpu_run_without_gpu", tmp_path_factory)


@background.session("gpu_session_without_gpu")
def gpu_session_without_gpu_command(folder: Path) -> Command:
    return _unless_skipped(Command(NO_GPU_SESSION, ROOT))


@pytest.fixture
def gpu_session_without_gpu(tmp_path_factory: pytest.TempPathFactory) -> background.Done:
    return background.result("gpu_session_without_gpu", tmp_path_factory)


@needs_frameworks
def test_a_gpu_run_without_a_gpu_fails_saying_what_is_missing(
        gpu_run_without_gpu: background.Done) -> None:
    rc, out, tmp_path = (gpu_run_without_gpu.returncode, gpu_run_without_gpu.output,
                         gpu_run_without_gpu.folder)
    assert rc == 1, out
    for line in ("probe: torch sees no CUDA device", "probe: jax sees no gpu device",
                 "gpu_check: neither torch nor JAX sees a GPU: no session run",
                 "summary: PROBLEM step probe exited 3", "summary: FAILED (gpu)"):
        assert line in out, out
    environment = json.loads((tmp_path / "environment.json").read_text())
    assert environment["torch"]["cuda_available"] is False


@needs_frameworks
def test_gpu_cases_skip_cleanly_where_there_is_no_gpu(
        gpu_session_without_gpu: background.Done) -> None:
    """What a session asked for a GPU does on a machine without one: each case a skip naming
    what its framework does not see, no error, exit 0."""
    out = gpu_session_without_gpu.output
    assert gpu_session_without_gpu.returncode == 0, out
    assert "4 skipped" in out and "error" not in out.lower(), out
    for reason in ("no gpu visible to torch (torch.cuda.is_available() is False)",
                   "no gpu visible to jax (jax.devices() has none)"):
        assert re.search(rf"SKIPPED \[2\] pytest_mlbench/plugin\.py:\d+: {re.escape(reason)}",
                         out), out


def junit(folder: Path, name: str, cases: list[tuple[str, str]]) -> None:
    """A JUnit file of (name, outcome) cases: outcome passed, failure or skipped."""
    body = "".join(f'<testcase name="{n}">' + ("" if o == "passed" else
                   f'<{o} message="{o} here: by 3.2x, rtol 1e-3"/>') + "</testcase>"
                   for n, o in cases)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.xml").write_text(f"<testsuites><testsuite>{body}</testsuite></testsuites>")


def judge(tmp_path: Path, steps: list[str], device: str = "gpu") -> tuple[int, dict[str, Any]]:
    (tmp_path / "steps.tsv").write_text("".join(f"{s}\n" for s in steps))
    rc = gpu_check.main(["summary", device, str(tmp_path / "out"), str(tmp_path)])
    return rc, json.loads((tmp_path / "out" / "summary.json").read_text())


def test_the_summary_passes_sessions_that_passed(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    junit(tmp_path / "junit", "timed-light", [("a", "passed"), ("b", "skipped")])
    rc, summary = judge(tmp_path, ["install\t0\t0", "timed-light\t0\t40"])
    assert rc == 0 and summary["problems"] == [], summary


def test_the_summary_fails_a_failed_case_and_a_session_cut_by_its_timeout(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "out").mkdir()
    junit(tmp_path / "junit", "timed-light", [("test_case[mlp-torch-jit-gpu-fp32]", "failure"),
                                              ("test_case[mlp-jax-jit-gpu-fp32]", "passed")])
    rc, summary = judge(tmp_path, ["timed-light\t1\t40", "timed-attention\t124\t180"])
    assert rc == 1
    assert summary["problems"] == ["step timed-light exited 1 after 40 s",
                                   "step timed-attention exited 124 after 180 s",
                                   "timed-light: 1 case(s) failed"]
    out = capsys.readouterr().out
    assert "FAILED test_case[mlp-torch-jit-gpu-fp32]: failure here: by 3.2x, rtol 1e-3" in out


def test_the_startup_measurement_cut_by_its_limit_is_unfinished_not_a_failure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """gpu_startup.py measures; cut by its 90 s (inductor's first C++ build, H200 run 19), it
    failed the whole check. It is reported as unfinished, naming the file it kept."""
    (tmp_path / "out").mkdir()
    junit(tmp_path / "junit", "timed-light", [("a", "passed")])
    rc, summary = judge(tmp_path, ["startup\t124\t90", "timed-light\t0\t40"])
    assert rc == 0 and summary["problems"] == [], summary
    assert summary["unfinished"] == ["step startup did not finish in its 90 s (cut, exit 124): "
                                     "startup.json holds the steps it finished"]
    assert "summary: unfinished step startup" in capsys.readouterr().out
    rc, summary = judge(tmp_path, ["startup\t1\t3", "timed-light\t0\t40"])
    assert rc == 1 and summary["problems"] == ["step startup exited 1 after 3 s"]


def test_an_interrupted_sessions_placeholder_counts_as_no_case(tmp_path: Path) -> None:
    """pytest cut by SIGINT writes tests="0" and one unnamed testcase: run 17 on an H200
    counted it as a passing case."""
    (tmp_path / "out").mkdir()
    (tmp_path / "junit").mkdir()
    (tmp_path / "junit" / "timed-mlp-gpt.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite '
        'name="pytest" errors="0" failures="0" skipped="0" tests="0" time="258.350">'
        '<testcase time="0.001" /></testsuite></testsuites>')
    rc, summary = judge(tmp_path, ["timed-mlp-gpt\t124\t260"])
    assert rc == 1 and summary["sessions"]["timed-mlp-gpt"]["counts"] == {}, summary


def test_merge_keeps_every_sessions_timed_cases_and_leaves_a_cut_one_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = {"machine_info": {"node": "h200"}, "benchmarks": [{"name": "a"}, {"name": "b"}]}
    (tmp_path / "mlp.json").write_text(json.dumps(first))
    (tmp_path / "gpt.json").write_text(json.dumps({"machine_info": {}, "benchmarks": [{"name": "c"}]}))
    (tmp_path / "cut.json").write_text('{"benchmarks": [')  # a session killed while writing
    out = tmp_path / "timed.json"
    files = [str(tmp_path / n) for n in ("mlp.json", "cut.json", "gpt.json", "absent.json")]
    assert gpu_check.main(["merge", str(out), *files]) == 0
    merged = json.loads(out.read_text())
    assert [b["name"] for b in merged["benchmarks"]] == ["a", "b", "c"]
    assert merged["machine_info"] == {"node": "h200"}
    assert "cut.json left out" in capsys.readouterr().err
    assert gpu_check.main(["merge", str(tmp_path / "none.json")]) == 0  # nothing timed: no file
    assert not (tmp_path / "none.json").exists()


def test_the_install_refuses_a_missing_wheels_folder_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(gpu_check, "registered", lambda: False)
    assert gpu_check.main(["install", str(tmp_path / "none"), str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"gpu_check install: no wheels folder {tmp_path / 'none'}; fetch it "
                   "beforehand with tools/fetch_gpu_wheels.sh (on a machine with network) and "
                   "carry it along")


def wheel(folder: Path, dist: str, module: str) -> Path:
    path = folder / f"{dist}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{module}/__init__.py", "VALUE = 1\n")
        archive.writestr(f"{dist}-1.0.dist-info/METADATA", f"Name: {dist}\nVersion: 1.0\n")
        archive.writestr(f"{dist}-1.0.dist-info/entry_points.txt",
                         f"[pytest11]\n{module} = {module}\n")
    return path


def test_the_install_unpacks_what_differs_where_there_is_no_pip(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel(wheels, "pytest_mlbench", "fake_mlbench")
    wheel(wheels, "py_cpuinfo2", "fake_cpuinfo")
    wheel(wheels, "threadpoolctl", "fake_threadpoolctl")
    monkeypatch.setattr(gpu_check, "registered", lambda: False)
    monkeypatch.setattr(gpu_check, "missing_modules", lambda: ["cpuinfo"])
    monkeypatch.setattr(gpu_check, "installed", {"threadpoolctl": "1.0"}.get)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(gpu_check.importlib.util, "find_spec",
                        lambda name, *a: None if name == "pip" else real_find_spec(name, *a))
    site = tmp_path / "site"
    assert gpu_check.install(wheels, site) == str(site)
    assert sorted(p.name for p in site.iterdir()) == [
        "fake_cpuinfo", "fake_mlbench", "py_cpuinfo2-1.0.dist-info",
        "pytest_mlbench-1.0.dist-info"]  # threadpoolctl 1.0 is installed: not again


def test_bad_usage_is_one_line() -> None:
    done = subprocess.run(["bash", str(SCRIPT), "--device=tpu"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 2
    assert done.stderr == ("gpu_check: --device is tpu; accepted: --device=gpu|cpu --out DIR "
                           "--wheels DIR --budget SECONDS --quick --no-startup --sessions "
                           "fp32,timed,other,gpu --select EXPR [-- PYTEST-ARGS]\n")


def test_an_unknown_session_is_one_line() -> None:
    done = subprocess.run(["bash", str(SCRIPT), "--sessions", "fp32,fp16"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith("gpu_check: --sessions is fp32,fp16, not a list of fp32, "
                                  "timed, other, gpu; accepted:") and done.stderr.count("\n") == 1


def waiting_for_a_command(pid: int) -> None:
    """Until the worker's main thread sleeps in its read of the next command: one stopped
    while it still sends its reply is dumped mid-write, and faulthandler, reading that
    thread's frames from another thread as it runs on, can lose its way there."""
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "S":
        assert time.monotonic() < deadline, f"worker {pid} never waited for a command"
        time.sleep(0.01)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="it finds workers in /proc")
def test_stacks_says_where_each_worker_of_its_folder_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """As a session is cut, `gpu_check.py stacks FOLDER` asks each worker that writes to FOLDER
    (MLBENCH_STACKS, child.py) where it is, stopped or not, and prints its serving thread's
    frames; a worker of another session (no such folder) is left alone: SIGUSR2 would end it."""
    from pytest_mlbench.engine.launcher import Pool, WorkerSpec

    spec = WorkerSpec("pytest_mlbench.engine.faults:faulty", 1, {})
    with Pool(spec, timeout=60) as other:
        folder = tmp_path / "stacks"
        folder.mkdir()
        monkeypatch.setenv("MLBENCH_STACKS", str(folder))
        with Pool(spec, timeout=60) as pool:
            pool.call("echo")
            waiting_for_a_command(pool.pids[0])
            pool.pause()  # as a timed campaign leaves every worker but the one it times
            gpu_check.stacks(folder)
            mine = pool.pids[0]
        assert other.call("echo")[0]["pid"] == other.pids[0]  # still alive and answering
    out = capsys.readouterr().out
    assert "asked 1 worker(s)" in out
    assert re.search(rf"worker {mine}: .*engine/launcher\.py:\d+ worker_main", out), out
    assert list(folder.iterdir()) == []  # each stack is printed, then its file removed
