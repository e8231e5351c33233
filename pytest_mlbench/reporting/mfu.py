"""Model FLOPs utilisation (MFU) of GPU cases: the model's FLOPs a second (the workload's count
of a training step's matmul FLOPs over the step time) as a share of the GPU's dense peak for
the dtype its matmuls run at, the figure MaxText, torchtitan, nanoGPT and llm.c report.

Two peaks: the vendor's (VENDOR_PEAKS, by GPU model) and the one this session measured (each
framework's best large matmul at the compute dtype, measuring/campaign._measure_peaks; the
record's ``peak_gflops`` and ``utilisation``). A figure far below both is the harness or the
framework; near the measured peak but far below the vendor's, the clocks or the kernels'
shapes.

VENDOR_PEAKS holds NVIDIA's datasheet figures without sparsity (the datasheets print the
tensor-core figures "with sparsity", twice these): NVIDIA H100 Tensor Core GPU datasheet (SXM5
and PCIe: bfloat16 and float16 989.4 and 756.5, TF32 494.7 and 378, float32 66.9 and 51.2,
float64 tensor core 66.9 and 51.2 TFLOP/s); NVIDIA H200 Tensor Core GPU datasheet (the H100
SXM5's compute with more and faster memory); NVIDIA A100 Tensor Core GPU datasheet (bfloat16
312, TF32 156, float32 19.5, float64 tensor core 19.5). nanoGPT's estimate_mfu divides by the
A100's 312.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_mlbench import tables
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.storing.record import Record

_H100_SXM = {"bfloat16": 989.4, "float16": 989.4, "tfloat32": 494.7, "float32": 66.9,
             "float64": 66.9}
VENDOR_PEAKS: dict[str, dict[str, float]] = {  # TFLOP/s, dense
    "H100 SXM": _H100_SXM,
    "H100 PCIe": {"bfloat16": 756.5, "float16": 756.5, "tfloat32": 378.0, "float32": 51.2,
                  "float64": 51.2},
    "H200": _H100_SXM,
    "A100": {"bfloat16": 312.0, "float16": 312.0, "tfloat32": 156.0, "float32": 19.5,
             "float64": 19.5},
}
HEADER = ("implementation", "step (ms)", "items/s", "TFLOP/s", "MFU", "bare loop MFU",
          "of measured peak")


def model_of(name: str) -> str | None:
    """The VENDOR_PEAKS entry of a GPU as nvidia-smi, torch or JAX name it ("NVIDIA H100 80GB
    HBM3" is an H100 SXM, "NVIDIA H100 PCIe" the PCIe card, "NVIDIA A100-SXM4-80GB" an
    A100); None for a model the table does not hold (the H100 NVL, for one)."""
    text = name.upper()
    if "H200" in text:
        return "H200"
    if "H100" in text and "NVL" not in text:
        return "H100 PCIe" if "PCIE" in text else "H100 SXM"
    if "A100" in text:
        return "A100"
    return None


def peak_dtype(precision: str) -> str:
    """The dtype whose peak a case's matmuls are held to: its policy's compute dtype, TF32
    where the policy lets float32 matmuls use it."""
    policy = POLICIES[precision]
    return "tfloat32" if policy.allow_tf32 else policy.compute_dtype


def vendor_peak(gpu: str, precision: str) -> float | None:
    """The GPU's dense peak for the precision's matmuls, TFLOP/s (None: not in the table)."""
    model = model_of(gpu)
    return VENDOR_PEAKS[model].get(peak_dtype(precision)) if model else None


def mfu(flops_per_step: int, step_s: float, peak_tflops: float) -> float:
    """Model FLOPs a second over the peak: 6.9 TFLOP a step in 20 ms on a 989 TFLOP/s GPU is
    0.35."""
    if step_s <= 0 or peak_tflops <= 0:
        raise ValueError(f"MFU needs a positive step time and peak (got {step_s}, {peak_tflops})")
    return flops_per_step / step_s / (peak_tflops * 1e12)


def items(dims: Mapping[str, int]) -> tuple[int, str]:
    """What a step processes, and its name: tokens (batch x seq) for a sequence model, images
    for an image model, else examples."""
    batch = int(dims.get("batch", 1))
    if "seq" in dims:
        return batch * int(dims["seq"]), "tokens"
    return batch, "images" if "image" in dims else "examples"


def mfu_table(records: Iterable[Record], gpu: str) -> list[str]:
    """One block per group of timed GPU cases with a FLOP count, fastest first: step time,
    items a second, model TFLOP/s, MFU against ``gpu``'s vendor peak ("-" where the table
    has no figure for it), the same at the bare loop's step (the built step in a plain loop:
    what the harness's rounds cost shows as the gap) and against this session's measured
    peak. Empty without such cases."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        if r.identity.device == "gpu" and r.measure is not None and r.measure.flops_per_step:
            groups.setdefault(r.identity.group, []).append(r)
    lines: list[str] = []
    for group, members in groups.items():
        precision = members[0].identity.precision
        peak = vendor_peak(gpu, precision)
        said = f"{peak:g} TFLOP/s dense {peak_dtype(precision)}" if peak else "not in the table"
        members.sort(key=lambda r: r.measure.step_s if r.measure else 0.0)
        lines += [f"{group} on {gpu or 'an unnamed GPU'} (vendor peak: {said})",
                  *tables.render(HEADER, [_row(r, peak) for r in members], indent="  ")]
    return lines


def _row(record: Record, peak: float | None) -> list[str]:
    m = record.measure
    assert m is not None and m.flops_per_step
    step = m.step_s
    count, unit = items(record.identity.dims)
    bare = getattr(m, "bare_s", None)  # the bare loop's step, where the record has one
    return [record.identity.impl, f"{step * 1e3:.2f}", f"{count / step:,.0f} {unit}",
            f"{m.flops_per_step / step / 1e12:.1f}",
            "-" if peak is None else f"{mfu(m.flops_per_step, step, peak):.1%}",
            "-" if peak is None or not bare else f"{mfu(m.flops_per_step, bare, peak):.1%}",
            "-" if m.utilisation is None else
            f"{m.utilisation:.0%} of {m.peak_gflops / 1e3:.0f}" if m.peak_gflops else "-"]


def gpu_name(machine_info: Mapping[str, Any]) -> str:
    """The first GPU of a run's machine_info (storing/machine.gpu_info), or ""."""
    gpus = (machine_info.get("mlbench") or {}).get("gpus") or machine_info.get("gpus") or []
    first = gpus[0] if isinstance(gpus, list) and gpus else {}
    return str(first.get("name", "")) if isinstance(first, Mapping) else ""


def legend() -> str:
    return ("MFU: the model's FLOPs a second (the workload's count of a step's matmul FLOPs: "
            "6 P + 12 L D T a token for the GPT, as nanoGPT and PaLM count) over the GPU's "
            "dense datasheet peak for the compute dtype (reporting/mfu.py); bare loop: the "
            "same at the step's plain loop; of measured peak: the figure over the best large "
            "matmul this session measured")
