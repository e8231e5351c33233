"""Model FLOPs utilisation: the vendor's dense peaks by GPU model, the arithmetic, and the
table of GPU cases (synthetic Records: nothing timed). Each check also shown failing on a
broken input."""

from __future__ import annotations

import pytest

from pytest_mlbench.reporting import mfu
from tests.synthetic import record

GPT2 = {"batch": 8, "seq": 1024, "vocab": 50304, "dim": 768, "layers": 12}
FLOPS = 7_001_333_563_392  # suites/gpt's count at GPT-2 124M, 8 x 1024 tokens


@pytest.mark.parametrize("name, model", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H200", "H200"), ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA H100 NVL", None),
    ("Tesla T4", None), ("", None)])
def test_gpu_names_as_nvidia_smi_torch_and_jax_give_them(name: str, model: str | None) -> None:
    assert mfu.model_of(name) == model


def test_the_peak_is_the_compute_dtypes_dense_figure() -> None:
    assert mfu.peak_dtype("amp") == "bfloat16" and mfu.peak_dtype("amp16") == "float16"
    assert mfu.peak_dtype("tf32") == "tfloat32" and mfu.peak_dtype("fp32") == "float32"
    assert mfu.vendor_peak("NVIDIA H100 80GB HBM3", "amp") == 989.4
    assert mfu.vendor_peak("NVIDIA H200", "amp") == mfu.vendor_peak("NVIDIA H100 80GB HBM3",
                                                                      "amp")
    assert mfu.vendor_peak("NVIDIA A100-SXM4-40GB", "bf16") == 312.0
    assert mfu.vendor_peak("NVIDIA H100 80GB HBM3", "fp32") == 66.9  # no tensor cores
    assert mfu.vendor_peak("Tesla T4", "amp") is None


def test_mfu_is_model_flops_a_second_over_the_peak() -> None:
    # 7.0 TFLOP in 20 ms: 350 TFLOP/s, 35.4% of an H100's 989.4
    assert mfu.mfu(FLOPS, 0.020, 989.4) == pytest.approx(0.35381, abs=1e-5)
    assert mfu.items(GPT2) == (8192, "tokens")
    assert mfu.items({"batch": 64, "image": 224}) == (64, "images")
    with pytest.raises(ValueError, match="positive step time and peak"):
        mfu.mfu(FLOPS, 0.0, 989.4)


def gpu_record(impl: str, median: float, measure_kw: dict[str, object] | None = None,
               **changes: object) -> object:
    changes = {"workload": "gpt", "head": "gpt", "dims": GPT2, "device": "gpu",
               "precision": "amp", "dtype": "float32", **changes}
    kw = measure_kw or {"flops_per_step": FLOPS, "peak_gflops": 700_000.0}
    return record(impl, median, measure_kw=kw, **changes)


def test_the_table_shows_mfu_of_gpu_cases_only() -> None:
    records = [gpu_record("torch-jit+sdpa", 0.020), gpu_record("jax-jit", 0.025),
               record("torch-eager", 1e-3)]  # a CPU case: not in the table
    lines = mfu.mfu_table(records, "NVIDIA H100 80GB HBM3")
    assert lines[0] == ("gpt gpu amp on NVIDIA H100 80GB HBM3 (vendor peak: 989.4 TFLOP/s "
                        "dense bfloat16)")
    assert lines[1].split()[:3] == ["implementation", "step", "(ms)"]
    fastest = lines[2].split()  # 20 ms a step (the synthetic rounds' median: 19.97)
    assert fastest[0] == "torch-jit+sdpa" and fastest[3] == "tokens"
    assert fastest[5:] == ["35.4%", "-", "50%", "of", "700"]  # vendor, bare, measured
    assert lines[-1].split()[0] == "jax-jit" and len(lines) == 4
    assert mfu.mfu_table([record("torch-eager", 1e-3)], "NVIDIA H100 80GB HBM3") == []


def test_a_gpu_the_table_does_not_hold_shows_no_vendor_mfu() -> None:
    lines = mfu.mfu_table([gpu_record("torch-jit", 0.02)], "Tesla T4")
    assert "vendor peak: not in the table" in lines[0] and lines[2].split()[5:7] == ["-", "-"]


def test_the_bare_loops_mfu_shows_what_the_harness_costs() -> None:
    """A record with a bare loop of 17.7 ms beside its 20 ms figure: 40.0% against 35.4%."""
    rec = gpu_record("torch-jit+sdpa", 0.020, measure_kw={"flops_per_step": FLOPS,
                                                          "bare_step_s": (0.0177,)})
    row = mfu.mfu_table([rec], "NVIDIA H100 80GB HBM3")[2].split()
    assert row[5:7] == ["35.4%", "40.0%"]


def test_the_gpu_comes_from_the_runs_machine_info() -> None:
    info = {"mlbench": {"gpus": [{"name": "NVIDIA H200", "driver": "580"}]}}
    assert mfu.gpu_name(info) == "NVIDIA H200" and mfu.gpu_name({"mlbench": {"gpus": []}}) == ""
