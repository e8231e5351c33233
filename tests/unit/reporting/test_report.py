"""The normalised table, ``pytest-mlbench report`` in its three modes, and the charts, all from
synthetic Records (nothing timed)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pytest_mlbench
from pytest_mlbench import cli, stats, tables
from pytest_mlbench.reporting import machines, normalised, plots
from pytest_mlbench.storing import runs
from pytest_mlbench.storing.record import Record
from tests.synthetic import bench, identity, measure, record, run_json, write
from tests.unit.measuring.test_hostspeed import reproducibility


def cols(line: str) -> list[str]:
    return line.split()


def control(seconds: float) -> dict[str, Any]:
    """pytest-mlbench 0.1's control entry (plain, extra_info control=matmul)."""
    entry = bench(None, "suites/test_control.py::test_control_matmul")
    entry["stats"]["data"] = [seconds] * 5
    entry["extra_info"] = {"control": "matmul", "flops_per_step": 2 * 512**3}
    return entry


def machine_run(model: str, scale: float, threads: int) -> dict[str, Any]:
    machine = {"cpu": {"model": model, "simd_flags": [], "logical_cores": threads,
                       "usable_cores": threads}, "threads": {}, "packages": {}, "gpus": []}
    recs = [record("jax-jit", 1e-3 * scale, threads=threads),
            record("numpy-eager", 2e-3 * scale, threads=threads),
            *(record("jax-jit", d * 1e-5 * scale, workload="linreg", head=f"linreg-d{d}",
                     shape=f"d{d}", dims={"n": 1000, "d": d}, threads=threads) for d in (2, 10, 100))]
    return run_json(control(1e-3 * scale), *map(bench, recs), machine=machine)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Machine A (2 cores) and machine B (8 cores) twice as fast in the control and every step."""
    return {name: write(tmp_path / f"{name}.json", machine_run(f"CPU {name.upper()}", scale, n))
            for name, scale, n in (("a", 1.0, 2), ("b", 0.5, 8))}


# -- the normalised table -----------------------------------------------------------------------

def test_table_has_intervals_ratios_utilisation_and_counts() -> None:
    fast = Record(identity("jax-jit"), "a", measure(1e-3, flops_per_step=10**6, peak_gflops=4.0,
                                                    compile_s=0.25, bare_step_s=(1e-3,) * 5))
    slow = Record(identity("numpy-eager"), "b", measure(2e-3, seed=1, rounds=12,
                                                        bare_step_s=(1.6e-3,) * 5))
    lines = normalised.normalised_table([slow, fast])
    assert lines[0] == "mlp cpu fp32"
    assert cols(lines[1]) == ["implementation", "step", "(ms)", "next", "run", "99%",
                              "normalised", "next", "run", "99%", "GFLOP/s", "util", "over",
                              "bare", "compile", "(s)", "procs", "x", "rounds"]
    jax, numpy = lines[2].split(), lines[3].split()
    assert jax[0] == "jax-jit" and float(jax[1]) == pytest.approx(1.0, rel=0.05)
    assert jax[4:6] == ["1.00", "reference"] and jax[6:8] == ["1.00", "25%"]
    assert float(jax[8]) == pytest.approx(1.0, abs=0.05) and jax[9] == "0.250"
    assert jax[10:] == ["5", "x", "20"]
    assert numpy[0] == "numpy-eager" and float(numpy[4]) == pytest.approx(2.0, rel=0.05)
    low, high = (float(x.strip("[],")) for x in numpy[5:7])
    assert low < float(numpy[4]) < high
    # 2 ms audited against 1.6 ms in a plain loop: 1.25, and marked past 10%
    assert numpy[7:9] == ["-", "-"] and float(numpy[9]) == pytest.approx(1.25, abs=0.05)
    assert numpy[10:13] == ["-", "5", "x"] and numpy[13] == "12"
    assert "over its bare loop" in lines[3] and "over its bare loop" not in lines[2]


def test_reference_sets_one_and_paired_ratios_within_a_session() -> None:
    recs = [record("jax-jit", 1e-3), record("numpy-eager", 2e-3, measure_kw={"seed": 2})]
    lines = normalised.normalised_table(recs, reference="numpy-eager")
    rows = {cols(line)[0]: cols(line) for line in lines[2:]}
    assert rows["numpy-eager"][4:6] == ["1.00", "reference"]
    assert rows["jax-jit"][4] == "0.50"
    m = recs[0].measure
    assert m is not None and normalised.relatives([(m, m)])[0].value == 1.0  # paired: exactly 1


def lucky_records(others: int) -> list[Record]:
    """A group of a reference, ``others`` implementations whose processes spread 5% as a
    shared host makes them, and one (numba-jit) whose process medians track the reference's
    exactly (its three pairs agree by chance)."""
    ref = record("jax-jit", 1e-3, measure_kw={"processes": 3, "between": 0.05})
    assert ref.measure is not None
    twin = Record(identity("numba-jit"), "twin", replace(ref.measure, passes=tuple(
        tuple(2 * t for t in p) for p in ref.measure.passes)))
    return [ref, twin, *(record(f"torch-v{i}", 3e-3, measure_kw={
        "processes": 3, "between": 0.05, "seed": 10 + i}) for i in range(others))]


def lucky_table(others: int) -> dict[str, list[str]]:
    """The rows of lucky_records' normalised table, by implementation."""
    return {cols(line)[0]: cols(line)
            for line in normalised.normalised_table(lucky_records(others))[2:]}


def test_a_ratio_whose_processes_agreed_by_chance_gets_the_tables_spread() -> None:
    """Three pairs that agree exactly promise a repeat run the same figure to the last digit;
    the table's other ratios say processes disagree by ~5% here, and the interval says so."""
    twin = lucky_table(others=8)["numba-jit"]
    low, high = (float(x.strip("[],")) for x in twin[5:7])
    assert twin[4] == "2.00" and low < 1.9 and high > 2.1
    # too few ratios to learn the run's spread from: the twin's own processes are all there is
    alone = lucky_table(others=stats.PRIOR_MIN - 2)["numba-jit"]
    assert alone[5:7] == ["[2.00,", "2.00]"]


def test_unstable_figures_show_their_modes() -> None:
    passes = tuple((0.72e-3,) * 10 for _ in range(3)) + tuple((1.61e-3,) * 10 for _ in range(2))
    rec = Record(identity(), "x", measure(1e-3).__class__(1, passes))
    (line,) = normalised.normalised_table([rec])[2:]
    assert line.endswith("unstable: spread 124%, modes 0.72 | 1.61 ms")


def test_unstable_figures_without_a_gap_say_they_have_no_separate_modes() -> None:
    """Processes 4-5% apart from each other, 13% from first to last: unstable, one cluster."""
    medians = (0.174e-3, 0.181e-3, 0.188e-3, 0.196e-3, 0.197e-3)
    passes = tuple((m,) * 10 for m in medians)
    rec = Record(identity(), "x", measure(1e-3).__class__(1, passes))
    (line,) = normalised.normalised_table([rec])[2:]
    assert line.endswith("unstable: spread 13%, no separate modes")


def test_each_process_is_shown_in_the_order_it_ran_with_the_probe_before_it() -> None:
    """Process 2 was slow for both implementations (drift, not a mode): the columns keep the
    order the passes ran in, the fastest implementation comes first, a case with a missing
    process shows a dash, and the probe's readings follow, one column a pass."""
    def rec(impl: str, medians: Sequence[float]) -> Record:
        return Record(identity(impl), impl, measure(1e-3).__class__(
            1, tuple((m * 0.99, m, m * 1.01) for m in medians)))
    recs = [rec("numpy-eager", (2.0e-4, 2.4e-4, 2.0e-4)), rec("jax-jit", (1.5e-4, 1.9e-4)),
            Record(identity("torch-eager"), "untimed", None)]
    lines = normalised.process_table(recs, {"interpreter_ms": [3.5, 4.25, 3.75]})
    assert lines[0] == "mlp cpu fp32: median step (ms) in each process, in the order they ran"
    assert cols(lines[1]) == ["implementation", "1", "2", "3"]
    assert cols(lines[2]) == ["jax-jit", "0.1500", "0.1900", "-"]
    assert cols(lines[3]) == ["numpy-eager", "0.2000", "0.2400", "0.2000"]
    assert lines[4] == "host probe before each process (ms)"
    assert cols(lines[6]) == ["Python", "loop", "3.50", "4.25", "3.75"]
    assert len(lines) == 7
    assert normalised.process_table([recs[2]], {"interpreter_ms": [3.5]}) == []


def test_report_processes_prints_them_and_refuses_the_other_modes(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", str(files["a"]), "--processes"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "mlp cpu fp32: median step (ms) in each process, in the order they ran" in out
    assert cli.main(["report", "--machines", str(files["a"]), str(files["b"]),
                     "--processes"]) == 2
    assert capsys.readouterr().err.strip() == (
        "pytest-mlbench: error: --processes is for one run's report; it does not go with "
        "--machines")


@pytest.mark.parametrize("mode", [[], ["--processes"], ["--machines"]])
def test_a_run_without_mlbench_cases_is_refused_rather_than_reported_empty(
        tmp_path: Path, files: dict[str, Path], mode: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    """A plain pytest-benchmark run (or an empty one) printed a file name and "control
    matmul: absent", exit 0: a report of nothing that looked like one."""
    plain = write(tmp_path / "plain.json", run_json(bench(None, "tests/test_x.py::test_sum")))
    others = [str(files["a"])] if mode == ["--machines"] else []
    assert cli.main(["report", *mode, *others, str(plain)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"pytest-mlbench: error: {plain}: no pytest-mlbench case in this run (1 pytest-benchmark "
        "entries, none with extra_info['mlbench']): nothing to report; give a run saved from a "
        "session of pytest-mlbench cases")
    assert cli.main(["report", *mode, *others, str(files["b"])]) == 0


def test_page_faults_while_timed_are_shown_only_when_there_are_some() -> None:
    passes = tuple((1e-3,) * 10 for _ in range(3))
    quiet = Record(identity(), "x", measure(1e-3).__class__(1, passes, faults_per_step=(0, 2, 1)))
    (line,) = normalised.normalised_table([quiet])[2:]
    assert "page faults" not in line
    loud = Record(identity(), "x", measure(1e-3).__class__(1, passes,
                                                           faults_per_step=(3, 16059, 12)))
    (line,) = normalised.normalised_table([loud])[2:]
    assert line.endswith("page faults 3-16059 a step")


def test_rounds_not_counted_from_the_start_are_named_only_when_there_are_some() -> None:
    counted = replace(record("jax-jit"), checks={"uncounted_rounds": [[], []]})
    spiked = replace(record("torch-jit"), checks={"uncounted_rounds": [[34], [31, 40]]})
    assert normalised.uncounted_line([counted, record("numpy-eager")]) is None
    line = normalised.uncounted_line([counted, spiked])
    assert line is not None
    assert line.startswith("audited rounds not counted from the seeded start")
    assert line.endswith(": mlp-torch-jit-cpu-fp32 (3)")


def test_records_without_a_measure_are_left_out_and_long_names_align() -> None:
    long = record("jax-" + "very-long-variant-name" * 3, 3e-3)
    lines = normalised.normalised_table([record(), record("numpy-eager", None), long])
    assert len(lines) == 4 and not any("numpy" in line for line in lines)
    header, *rows = lines[1:]
    end = header.index("step (ms)") + len("step (ms)")
    assert all(row[end - 1].isdigit() and row[end] == " " for row in rows)


def test_one_block_per_group_in_first_seen_order() -> None:
    recs = [record(precision="bf16", dtype="bfloat16"), record(), record(device="gpu")]
    assert [line for line in normalised.normalised_table(recs) if not line.startswith(" ")] == [
        "mlp cpu bf16", "mlp cpu fp32", "mlp gpu fp32"]


# -- pytest-mlbench report ----------------------------------------------------------------------

def test_one_run_with_an_unknown_reference_lists_what_exists(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", str(files["a"]), "--reference", "numpy-eager"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == str(files["a"]) and out[-1] == "control matmul: 268.4 GFLOP/s"
    block = out[out.index("mlp cpu fp32"):]
    assert cols(block[2])[0] == "jax-jit" and cols(block[2])[4] == "0.50"
    assert cli.main(["report", str(files["a"]), "--reference", "jax"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"pytest-mlbench: error: --reference 'jax': no such implementation in {files['a']}; "
        "available: jax-jit, numpy-eager")


def test_one_run_shows_the_host_probe_it_recorded(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = machine_run("CPU A", 1.0, 2)
    run["machine_info"]["mlbench"]["host_probe"] = {"interpreter_ms": [5.0, 6.0, 5.5],
                                                    "kernel_ms": [1.25, 1.5, 1.0]}
    assert cli.main(["report", str(write(tmp_path / "probe.json", run))]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "host probe before each of 3 process(es): Python loop 5.50 ms (5.00-6.00), "
        "one-thread matmul 1.25 ms (1.00-1.50); a change here between runs moves eager "
        "(dispatch-bound) figures most; the host changed speed during this run (one-thread "
        "matmul 50% slower in its slowest process than its fastest): a repeat run's ratios "
        "may not hold")


def test_machines_group_by_identity_without_threads_and_never_mix_sizes(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", "--machines", str(files["a"]), str(files["b"])]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "linreg: step time (ms) | in control matmuls"
    mlp = out[out.index("mlp: step time (ms) | in control matmuls"):]
    assert cols(mlp[1]) == ["group", "/", "implementation", "cpu-a-2c", "cpu-b-8c"]
    jax = cols(next(line for line in mlp if "jax-jit" in line))
    # 2 and 8 threads are one row; raw: B twice as fast; in control matmuls: the same
    assert float(jax[4]) == pytest.approx(2 * float(jax[7]), rel=0.02)
    assert float(jax[6]) == pytest.approx(float(jax[9]), rel=0.02)
    linreg = out[: out.index("mlp: step time (ms) | in control matmuls")]
    assert [cols(line)[0] for line in linreg[3:]] == ["linreg-d10", "linreg-d100", "linreg-d2"]


def test_machines_rows_split_by_dims() -> None:
    small = runs.from_json(run_json(bench(record(dims={"batch": 8}))), "small")
    big = runs.from_json(run_json(bench(record(dims={"batch": 1024}))), "big")
    rows = machines.machine_rows([("s", small), ("b", big)], "mlp")
    assert {k: list(v) for k, v in rows.items()} == {
        "mlp cpu fp32 jax-jit [batch=1024]": ["b"], "mlp cpu fp32 jax-jit [batch=8]": ["s"]}


def test_unknown_workload_lists_what_exists(files: dict[str, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", "--machines", str(files["a"]), "--workload", "vit"]) == 2
    assert capsys.readouterr().err.strip() == ("pytest-mlbench: error: --workload 'vit': not in "
                                               "the runs given; available: linreg, mlp")


def test_compare_judges_like_the_gate_and_lists_machine_differences(
        tmp_path: Path, files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    slower = run_json(bench(record("jax-jit", 1.3e-3, measure_kw={"seed": 3}, threads=2)),
                      machine=json.loads(files["a"].read_text())["machine_info"]["mlbench"])
    cur = write(tmp_path / "cur.json", slower)
    assert cli.main(["report", "--compare", str(files["a"]), str(cur), "--plots",
                     str(tmp_path / "p")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert any(line.endswith("SLOWER") for line in out)
    assert "in the baseline, not run this time: " in "\n".join(out)
    assert any(line.startswith("mlbench gate: FAILED: 1 of 1") for line in out)
    assert (tmp_path / "p" / "compare-mlp.svg").is_file()
    assert cli.main(["report", "--compare", str(files["a"]), str(files["b"])]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "machine differs: cpu.model: CPU A -> CPU B" in out
    assert out[-1] == "mlbench gate: nothing judged: 5 not comparable"  # 2 vs 8 threads
    assert cli.main(["report", "--compare", str(files["a"]), str(files["a"])]) == 0


def test_usage_errors_exit_2(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", "--compare", str(files["a"])]) == 2
    assert cli.main(["report", "--compare", str(files["a"]), str(files["a"]),
                     "--threshold", "0.1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "pytest-mlbench: error: --compare takes two runs, BASELINE and RUN; got 1"
    assert err[1].startswith("pytest-mlbench: error: --threshold: '0.1' has no '%'")


def test_without_matplotlib_tables_print_and_charts_are_skipped(
        files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delitem(sys.modules, "pytest_mlbench.reporting.plots")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert cli.main(["report", str(files["a"]), "--plots", str(tmp_path / "p")]) == 0
    captured = capsys.readouterr()
    assert "mlp cpu fp32" in captured.out and not (tmp_path / "p").exists()
    assert captured.err.splitlines() == [
        "pytest-mlbench: charts skipped: matplotlib is not installed (pip install "
        "'pytest-mlbench[report]')"]


BLOCKED = """
import sys
sys.modules.update({"matplotlib": None})  # the base install: no report extra
from pytest_mlbench import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def test_the_base_install_judges_and_prints_tables(files: dict[str, Path], tmp_path: Path) -> None:
    """Without matplotlib: --compare judges (scipy.stats is a base dependency), tables print,
    and --plots says in one line which extra the charts need."""
    for args, status in ((["--compare", str(files["a"]), str(files["a"])], 0),
                         ([str(files["a"]), "--plots", str(tmp_path / "p")], 0)):
        done = subprocess.run([sys.executable, "-c", BLOCKED, "report", *args],
                              capture_output=True, text=True)
        assert done.returncode == status, done.stderr
        assert "Traceback" not in done.stderr and done.stdout
    assert done.stderr.strip().endswith("(pip install 'pytest-mlbench[report]')")


def test_version_and_module_entry() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_mlbench", "--version"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"pytest-mlbench {pytest_mlbench.__version__}"
    pyproject = (Path(__file__).parents[3] / "pyproject.toml").read_text()
    assert 'pytest-mlbench = "pytest_mlbench.cli:main"' in pyproject
    assert '\nmlbench = "pytest_mlbench.cli:main"' not in pyproject  # taken on PyPI


# -- charts -------------------------------------------------------------------------------------

def test_bar_chart_has_error_bars(tmp_path: Path) -> None:
    recs = [record("jax-jit", 1e-3), record("numpy-eager", 2e-3)]
    fig = plots.bar_chart(recs, "mlp cpu fp32")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["jax-jit", "numpy-eager"]
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([1.0, 2.0], rel=0.05)
    (caps,) = [c for c in ax.containers if hasattr(c, "lines") and c.lines[2]]
    segments = caps.lines[2][0].get_segments()
    assert all(seg[0][1] < h < seg[1][1] for seg, h in zip(segments, heights, strict=True))
    assert all(p.stat().st_size > 1000 for p in plots.save(fig, tmp_path, "bars"))


def test_sweep_chart_plots_time_against_d(files: dict[str, Path], tmp_path: Path) -> None:
    recs = [rec for _, rec in runs.load_run(files["a"]).cases]
    fig = plots.sweep_chart(recs)
    (series,) = fig.axes[0].containers  # one errorbar container per implementation
    line, _, (bars,) = series
    assert series.get_label() == "jax-jit fp32" and len(bars.get_segments()) == 3
    assert list(line.get_xdata()) == [2, 10, 100]
    assert list(line.get_ydata()) == pytest.approx([0.02, 0.1, 1.0], rel=0.05)
    assert fig.axes[0].get_xscale() == "log"


def test_machine_chart_series_per_machine(files: dict[str, Path], tmp_path: Path) -> None:
    loaded = [(n, runs.load_run(files[n])) for n in ("a", "b")]
    raw = plots.machine_chart(loaded, "mlp").axes[0]
    bars = [c for c in raw.containers if c.get_label() in ("a", "b")]
    assert [[p.get_height() for p in c] for c in bars] == [
        pytest.approx([1.0, 2.0], rel=0.05), pytest.approx([0.5, 1.0], rel=0.05)]
    norm = plots.machine_chart(loaded, "mlp", normalised=True).axes[0]
    bars = [c for c in norm.containers if c.get_label() in ("a", "b")]
    assert [[p.get_height() for p in c] for c in bars] == [
        pytest.approx([1.0, 2.0], rel=0.05)] * 2
    assert cli.main(["report", "--machines", str(files["a"]), str(files["b"]), "--plots",
                     str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.iterdir()} >= {"machines-mlp.png", "machines-mlp.svg",
                                                     "machines-normalised-linreg.svg"}


def test_the_reproducibility_tool_judges_each_run_as_its_table_does(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture,
                                                                    monkeypatch: pytest.MonkeyPatch
                                                                    ) -> None:
    """tools/reproducibility.py shows each run's ratio with the interval that run's own
    normalised table shows (the run's prior included), not one of its own making."""
    recs = lucky_records(others=8)
    table = {cols(line)[0]: " ".join(cols(line)[4:7]) for line in normalised.normalised_table(recs)[2:]}
    for i in (1, 2):
        write(tmp_path / f"run{i}.json", run_json(*map(bench, recs)))
    tool = reproducibility()
    monkeypatch.setattr("sys.argv", ["reproducibility.py", "--read", str(tmp_path)])
    tool.main()
    shown = {cols(line)[0]: " ".join(cols(line)[1:4]) for line in capsys.readouterr().out.splitlines()
             if line.startswith("  ") and cols(line)[0] in table}
    assert shown["numba-jit"] == table["numba-jit"] and shown["torch-v3"] == table["torch-v3"]


# -- bad targets and misuse: one line, exit 2 ---------------------------------------------------

@pytest.mark.parametrize(("target", "said"), [
    ("/dev/null", "--plots /dev/null: not a folder; give a folder for the charts"),
    ("FILE", "--plots {tmp}/file: not a folder"),
    ("/proc/no/such", "--plots /proc/no/such: cannot make the folder"),
])
def test_a_plots_target_that_is_not_a_writable_folder_is_one_line_before_any_work(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        target: str, said: str) -> None:
    if target == "FILE":
        target = str(tmp_path / "file")
        Path(target).write_text("x")
    assert cli.main(["report", str(files["a"]), "--plots", target]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"pytest-mlbench: error: "
                                               f"{said.format(tmp=tmp_path)}")
    assert captured.out == ""


def test_a_chart_that_cannot_be_written_is_one_line(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*args: object, **kw: object) -> None:
        raise OSError(28, "No space left on device", str(tmp_path / "out" / "bars.png"))

    monkeypatch.setattr(plots, "save", full)
    assert cli.main(["report", str(files["a"]), "--plots", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"pytest-mlbench: error: cannot write {tmp_path}/out/bars.png: No space left "
                   "on device; free space or give another --plots folder"]


def test_the_same_run_given_twice_is_refused_naming_it(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    a = str(files["a"])
    assert cli.main(["report", "--machines", a, a]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("are the same run "
                                             f"({a}); give each run once")


def test_a_run_whose_rounds_are_all_zero_is_refused(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    data = json.loads(files["a"].read_text())
    for entry in data["benchmarks"]:
        entry["stats"]["data"] = [0.0] * len(entry["stats"].get("data") or [1])
        found = (entry.get("extra_info", {}).get("mlbench") or {}).get("measure")
        if found:
            found["passes"] = [[0.0] * len(p) for p in found["passes"]]
    zero = write(tmp_path / "zero.json", data)
    assert cli.main(["report", "--compare", str(zero), str(files["a"])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("must list finite, positive seconds" in err[0]
                              or "must be positive finite seconds (got 0.0)" in err[0]), err


def test_bounds_far_from_their_figure_print_in_three_figures_not_140_digits() -> None:
    assert tables.interval(1.5, 3.2e137, ".4f") == "[1.5000, 3.2e+137]"
    assert tables.interval(-0.5, 2e130, "+.1%") == "[-50.0%, +2e+132%]"
    assert tables.interval(0.98, 1.03, ".2f") == "[0.98, 1.03]"


def test_copies_of_one_run_in_two_folders_get_a_column_each(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "elsewhere" / files["a"].name
    copy.parent.mkdir()
    copy.write_bytes(files["a"].read_bytes())
    assert cli.main(["report", "--machines", str(files["a"]), str(copy)]) == 0
    out = capsys.readouterr().out
    assert f":{files['a']}" in out and f":{copy}" in out


def test_a_run_of_400000_rounds_a_process_reports_in_seconds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The bootstrap held resamples x rounds draws: minutes and gigabytes for this run."""
    import time

    from tests.synthetic import measure as make

    def clocked(m: float) -> Any:
        """Rounds of whole nanoseconds, as a clock gives them (a float of all 17 digits
        takes twice as long to write and read, and the file is written and read here)."""
        made = make(m, processes=3, rounds=400_000)
        return replace(made, passes=tuple(tuple(np.round(p, 9).tolist()) for p in made.passes))

    recs = [Record(identity(impl), impl, clocked(m))
            for impl, m in (("jax-jit", 1e-3), ("jax-eager", 2e-3))]
    path = write(tmp_path / "long.json", run_json(*map(bench, recs)))
    start = time.monotonic()
    assert cli.main(["report", str(path)]) == 0
    assert time.monotonic() - start < 60
    assert "3 x 400000" in capsys.readouterr().out


# -- the scaling table --------------------------------------------------------------------------

def parallel_record(workers: int, strategy: str, median: float, held: int | None = None,
                    impl: str = "torch-eager") -> Record:
    rec = record(impl, median, workers=workers, strategy=strategy,
                 dims={"batch": 64, "seq": 4}, measure_kw={"between": 0.0, "within": 0.0})
    if held is None:
        return rec
    return replace(rec, checks={"resident": {"params": [held, held - 8], "grads": [held, 0],
                                             "optimizer_state": [2 * held, 2 * held]},
                                "collectives": [[0.5, 0.3], [0.9, 0.9], [0.2, 0.2]]})


def test_the_scaling_table_reads_efficiency_rate_and_what_each_worker_holds() -> None:
    from pytest_mlbench.reporting import scaling

    found = scaling.scaling_table([
        parallel_record(1, "", 4e-3), parallel_record(2, "dp", 2.5e-3, held=2**20),
        parallel_record(2, "fsdp", 5e-3, held=2**19), record("numpy-eager", 1e-3)])
    assert found[0] == "mlp cpu fp32"
    rows = {cols(line)[1]: cols(line) for line in found[2:]}
    assert set(rows) == {"1", "dp-w2", "fsdp-w2"}  # "1 device", the two layouts; numpy has none
    # dp: 4 ms / (2 x 2.5 ms) = 0.80; 64 x 4 tokens a step at 2.5 ms = 102,400 a second
    assert rows["dp-w2"][2:6] == ["2.5", "102,400", "51,200", "0.80"]
    # collectives: the median pass's mean share (0.4), and that share of the 2.5 ms step
    assert " ".join(rows["dp-w2"][6:9]) == "40% (1 ms)"
    assert rows["dp-w2"][9:] == ["4", "1", "|", "1", "|", "2"]  # MiB: held in all, then each
    assert rows["fsdp-w2"][5] == "0.40" and rows["fsdp-w2"][9] == "2"
    # an engine that does not say what it holds of a category (TensorFlow's gradients): "-"
    tf_like = replace(parallel_record(2, "dp", 2.5e-3, held=2**20),
                      checks={"resident": {"params": [2**20, 2**20]}})
    [row] = [cols(line) for line in scaling.scaling_table([tf_like])[2:]]
    assert row[-5:] == ["1", "|", "-", "|", "-"]
    assert scaling.scaling_table([record("numpy-eager", 1e-3)]) == []


def test_two_processes_show_their_spread_in_words_not_a_useless_interval() -> None:
    """At two processes a 99% prediction interval is Student's t at one degree of freedom
    ([0.0000, 8217356] ms was printed for jax-eager): the table prints the processes' spread
    instead and says how many processes give an interval; at five it prints intervals."""
    recs = [Record(identity("jax-jit"), "a", measure(1e-3, processes=2)),
            Record(identity("numpy-eager"), "b", measure(2e-3, processes=2, seed=3))]
    lines = normalised.normalised_table(recs)
    numpy = next(line for line in lines if line.strip().startswith("numpy-eager"))
    assert re.search(r"2\.\d+ +spread [12]\.\d+-2\.\d+ +2\.\d\d +spread \d\.\d\d-\d\.\d\d",
                     numpy), numpy
    assert "[" not in numpy
    assert lines[-1].startswith("spread a-b: the processes' lowest and highest figure; with "
                                "fewer than 3 processes a 99% interval for the next run is too "
                                "wide to use") and "--mlbench-processes=3 or more" in lines[-1]
    five = normalised.normalised_table([Record(identity("jax-jit"), "a", measure(1e-3))])
    assert "spread" not in " ".join(five)
