"""Machine facts that matter for ML timings, added to pytest-benchmark's machine_info.

Only stable facts: CPU model and flags, core counts, thread settings, BLAS, framework versions
and GPU model and driver. Nothing that changes between runs (clock speeds, load)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

# flags that change which kernels BLAS, XLA, oneDNN and inductor pick
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
              "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8", "asimd", "sve")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "NUMBA_NUM_THREADS", "XLA_FLAGS", "TF_NUM_INTRAOP_THREADS", "CUDA_VISIBLE_DEVICES")
PACKAGES = ("numpy", "jax", "jaxlib", "torch", "tensorflow-cpu", "tensorflow", "numba",
            "llvmlite", "autograd", "chex", "pytest-benchmark")


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    fields: dict[str, str] = {}
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", fields.get("Features", "")).split())
    return {
        "model": fields.get("model name", fields.get("Hardware", "unknown")),
        "simd_flags": sorted(flag for flag in SIMD_FLAGS if flag in flags),
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }


def blas_info() -> dict[str, Any]:
    try:
        config: Mapping[str, Any] = np.show_config(mode="dicts")  # type: ignore[func-returns-value]
        blas = config["Build Dependencies"]["blas"]
        return {"name": blas.get("name"), "version": blas.get("version")}
    except (KeyError, TypeError, ValueError):
        return {"name": "unknown", "version": "unknown"}


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def gpu_info() -> list[dict[str, str]]:
    """One entry per NVIDIA GPU (model, driver, memory) from nvidia-smi; empty without one."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = [[part.strip() for part in line.split(",")] for line in out.splitlines() if line]
    return [dict(zip(("name", "driver", "memory"), row, strict=False)) for row in rows]


def machine_info() -> dict[str, Any]:
    return {
        "cpu": cpu_info(),
        "blas": blas_info(),
        "threads": {var: os.environ.get(var, "unset") for var in THREAD_VARS},
        "packages": package_versions(),
        "gpus": gpu_info(),
    }
