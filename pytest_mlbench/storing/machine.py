"""Machine facts that matter for ML timings, for ``machine_info["mlbench"]``.

Only stable facts: CPU model and flags (py-cpuinfo, so macOS and Windows get a real model, not
a parse of Linux's /proc/cpuinfo), core counts, the BLAS and OpenMP libraries actually loaded
with their versions and thread counts (threadpoolctl, not NumPy's build config), thread
variables, framework versions, GPU model and driver. Nothing that changes between runs
(clock speeds, load)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from importlib import metadata
from typing import Any

# flags that change which kernels BLAS, XLA, oneDNN and inductor pick
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
              "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8", "asimd", "sve",
              "neon")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "NUMBA_NUM_THREADS", "XLA_FLAGS", "TF_NUM_INTRAOP_THREADS", "CUDA_VISIBLE_DEVICES")
PACKAGES = ("numpy", "jax", "jaxlib", "torch", "tensorflow-cpu", "tensorflow", "numba",
            "llvmlite", "autograd", "chex", "pytest-benchmark")
POOL_FIELDS = ("user_api", "internal_api", "version", "num_threads", "threading_layer",
               "architecture")


@functools.cache
def _cpuinfo() -> dict[str, Any]:
    """py-cpuinfo's reading (it starts a subprocess: once per process is enough)."""
    import cpuinfo

    return dict(cpuinfo.get_cpu_info())


def usable_cores() -> int | None:
    """Cores this process may run on (affinity, cgroup pinning), where the OS says."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    if hasattr(os, "process_cpu_count"):  # Python 3.13 on macOS and Windows
        return os.process_cpu_count()
    return None


def cpu_info(info: dict[str, Any] | None = None) -> dict[str, Any]:
    info = _cpuinfo() if info is None else info
    flags = {str(f).lower() for f in info.get("flags", [])}
    model = str(info.get("brand_raw") or info.get("arch_string_raw") or "unknown").strip()
    return {
        "model": " ".join(model.split()),
        "arch": str(info.get("arch", "unknown")),
        "simd_flags": sorted(flag for flag in SIMD_FLAGS if flag in flags),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable_cores(),
    }


def threadpools() -> list[dict[str, Any]]:
    """BLAS and OpenMP libraries loaded in this process, with version and thread count."""
    import numpy  # noqa: F401  (loads NumPy's BLAS, so it is reported even before any case)
    from threadpoolctl import threadpool_info

    return [{k: pool.get(k) for k in POOL_FIELDS} for pool in threadpool_info()]


def blas_info(pools: list[dict[str, Any]]) -> dict[str, Any]:
    """The first loaded BLAS, for a one-line summary; every pool is in ``threadpools``."""
    blas = [p for p in pools if p.get("user_api") == "blas"]
    if not blas:
        return {"name": "none loaded", "version": None, "threads": None}
    first = blas[0]
    return {"name": first["internal_api"], "version": first["version"],
            "threads": first["num_threads"]}


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
    pools = threadpools()
    return {
        "cpu": cpu_info(),
        "blas": blas_info(pools),
        "threadpools": pools,
        "threads": {var: os.environ.get(var, "unset") for var in THREAD_VARS},
        "packages": package_versions(),
        "gpus": gpu_info(),
    }
