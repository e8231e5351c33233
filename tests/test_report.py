"""``mlbench report`` tables and the charts, from synthetic saved runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_mlbench import cli, compare, plots
from tests.test_gate import bench_json, run_json

MLP = "suites/test_workloads.py::test_train_step[mlp-{}-cpu-fp32]"


def spread(median: float) -> list[float]:
    """Rounds whose median is exactly ``median``."""
    return [median * f for f in (0.95, 1.0, 1.05, 1.0, 1.1)] * 6


def step(impl: str, seconds: float, workload: str = "mlp", shape: str = "",
         d: int | None = None) -> dict[str, Any]:
    framework, variant = impl.split("-")
    head = f"{workload}-{shape}" if shape else workload
    info: dict[str, Any] = {
        "workload": workload, "shape": shape, "framework": framework, "variant": variant,
        "precision": "fp32", "steps_per_call": 10, "first_call_s": 0.1, "compile_s": 0.1,
        "flops_per_step": 10**6,
        "dims": {"n": 1000, "d": d} if d else {"batch": 1024}, "group": f"{head} cpu fp32"}
    return bench_json(f"suites/test_workloads.py::test_train_step[{head}-{impl}-cpu-fp32]",
                      spread(10 * seconds), **info)


def control(seconds: float) -> dict[str, Any]:
    return bench_json("suites/test_control.py::test_control_matmul", spread(seconds),
                      control="matmul", flops_per_step=2 * 512**3, steps_per_call=1,
                      group="control")


def machine(model: str) -> dict[str, Any]:
    return {"cpu": {"model": model, "simd_flags": [], "logical_cores": 8, "usable_cores": 8},
            "blas": {}, "threads": {}, "packages": {}, "gpus": []}


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    """Machine A, and machine B twice as fast in both the control and every step."""
    out = {}
    for name, scale in (("a", 1.0), ("b", 0.5)):
        run = run_json(control(1e-3 * scale), step("jax-jit", 1e-3 * scale),
                       step("numpy-eager", 2e-3 * scale),
                       *(step("jax-jit", d * 1e-5 * scale, "linreg", f"d{d}", d) for d in (2, 10, 100)),
                       machine=machine(f"CPU {name.upper()}"))
        out[name] = tmp_path / f"{name}.json"
        out[name].write_text(json.dumps(run))
    return out


def test_one_run_table_normalised_to_a_reference(runs: dict[str, Path],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", str(runs["a"]), "--reference", "numpy-eager"]) == 0
    out = capsys.readouterr().out.splitlines()
    block = out[out.index("mlp cpu fp32"):]
    assert block[2].split()[:3] == ["jax-jit", "1.0000", "0.50"]
    assert block[3].split()[:3] == ["numpy-eager", "2.0000", "1.00"]
    assert out[-1] == "control matmul: 268.4 GFLOP/s"


def test_machines_side_by_side_raw_and_normalised_by_control(
        runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", "--machines", str(runs["a"]), str(runs["b"])]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["group", "/", "implementation", "cpu-a-8c", "cpu-b-8c"]
    jax = next(line for line in out if "jax-jit" in line).split()
    # raw: B is twice as fast; normalised by the control matmul: the same
    assert jax[4:] == ["1.0000", "|", "1.000", "0.5000", "|", "1.000"]


def test_two_runs_compared_with_gate_statistics(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    base.write_text(json.dumps(run_json(step("jax-jit", 1e-3))))
    cur.write_text(json.dumps(run_json(step("jax-jit", 1.2e-3))))
    assert cli.main(["report", "--compare", str(base), str(cur), "--plots",
                     str(tmp_path / "p")]) == 1
    out = capsys.readouterr().out
    assert "SLOWER" in out and "mlbench gate: FAILED: 1 of 1" in out
    assert (tmp_path / "p" / "compare-mlp.svg").is_file()
    assert cli.main(["report", "--compare", str(base), str(base)]) == 0


def test_usage_errors_exit_2(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", "--compare", str(runs["a"])]) == 2
    assert cli.main(["report", "--compare", str(runs["a"]), str(runs["a"]),
                     "--threshold", "x"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["mlbench: error: --compare takes two runs, BASELINE and RUN; got 1",
                   "mlbench: error: --mlbench-gate-threshold: 'x' is not a percentage; "
                   "give e.g. 10%"]


def test_bar_chart_holds_each_implementation(runs: dict[str, Path], tmp_path: Path) -> None:
    rows = compare.results(json.loads(runs["a"].read_text()))
    fig = plots.bar_chart(rows, "mlp cpu fp32")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["jax-jit", "numpy-eager"]
    assert [round(p.get_height(), 6) for p in ax.containers[0]] == [1.0, 2.0]
    assert all(p.stat().st_size > 1000 for p in plots.save(fig, tmp_path, "bars"))


def test_sweep_chart_plots_time_against_d(runs: dict[str, Path], tmp_path: Path) -> None:
    fig = plots.sweep_chart(json.loads(runs["a"].read_text()))
    (line,) = fig.axes[0].get_lines()
    assert line.get_label() == "jax-jit fp32" and list(line.get_xdata()) == [2, 10, 100]
    assert [round(y, 6) for y in line.get_ydata()] == [0.02, 0.1, 1.0]
    assert fig.axes[0].get_xscale() == "log"
    paths = plots.save(fig, tmp_path, "sweep")
    assert [p.suffix for p in paths] == [".png", ".svg"] and all(p.is_file() for p in paths)


def test_machine_chart_series_per_machine(runs: dict[str, Path], tmp_path: Path) -> None:
    loaded = [(n, json.loads(runs[n].read_text())) for n in ("a", "b")]
    raw = plots.machine_chart(loaded, "mlp").axes[0]
    assert [c.get_label() for c in raw.containers] == ["a", "b"]
    assert [[round(p.get_height(), 6) for p in c] for c in raw.containers] == [[1.0, 2.0],
                                                                                [0.5, 1.0]]
    norm = plots.machine_chart(loaded, "mlp", normalised=True).axes[0]
    assert [[round(p.get_height(), 3) for p in c] for c in norm.containers] == [[1.0, 2.0],
                                                                                 [1.0, 2.0]]
    assert cli.main(["report", "--machines", str(runs["a"]), str(runs["b"]), "--plots",
                     str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.iterdir()} >= {"machines-mlp.png", "machines-mlp.svg",
                                                     "machines-normalised-mlp.svg"}


def test_data_parallel_entries_read_by_their_impl_and_worker_step_time() -> None:
    """A saved run mixing training steps and data-parallel cases (no ``variant``) reads whole."""
    from pytest_mlbench.timing import Result

    dp = {"group": "mlp data-parallel cpu fp32", "stats": {"median": 0.5},
          "extra_info": {"framework": "torch", "impl": "torch-gloo-w2", "steps_per_call": 10,
                         "step_s": 0.04, "compile_s": 0.0, "flops_per_step": 4e7}}
    result = Result.from_benchmark(dp)
    assert result is not None
    assert (result.impl, result.step_s, result.gflops) == ("torch-gloo-w2", 0.04, 1.0)
    assert Result.from_benchmark({"extra_info": {"control": True}, "stats": {"median": 1}}) is None
