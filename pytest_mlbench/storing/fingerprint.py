"""Machine id and fingerprint from the ``machine_info["mlbench"]`` facts that storing/machine.py adds.

The id names the hardware (CPU model, usable cores, GPU model) and picks the baselines/<id>/
folder; the fingerprint adds everything else that moves ML timings (SIMD flags, the BLAS
libraries loaded and their thread counts, thread settings, framework versions, GPU driver,
Python). Volatile readings (clocks, load, host name) are never part of either, so an unchanged
machine always matches itself. Both read saved files, so every field is read defensively: a
wrong type reads as absent, never as an exception."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

Fingerprint = dict[str, str]


def slug(text: str) -> str:
    """``Intel(R) Xeon(R) Processor`` -> ``intel-xeon-processor``."""
    text = re.sub(r"\((r|tm|c)\)", "", text.lower())
    return re.sub(r"[^a-z0-9.]+", "-", text).strip("-") or "unknown"


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _objs(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _mlbench(machine_info: Any) -> Mapping[str, Any]:
    return _obj(_obj(machine_info).get("mlbench"))


def machine_id(machine_info: Mapping[str, Any]) -> str:
    """Hardware identity only, so upgrading a framework keeps the same baselines folder:
    ``<cpu-model-slug>-<cores>c[-<gpu-slug>...]``."""
    info = _mlbench(machine_info)
    cpu = _obj(info.get("cpu"))
    cores = cpu.get("usable_cores") or cpu.get("logical_cores") or 0
    parts = [slug(str(cpu.get("model", "unknown"))), f"{cores}c"]
    parts += [slug(str(gpu.get("name", "gpu"))) for gpu in _objs(info.get("gpus"))]
    return "-".join(parts)


def _blas(info: Mapping[str, Any]) -> Fingerprint:
    """Loaded BLAS libraries (threadpoolctl) with their threads; old files: the build's BLAS."""
    pools = [p for p in _objs(info.get("threadpools")) if p.get("user_api") == "blas"]
    if not pools:
        blas = _obj(info.get("blas"))
        return {"blas": f"{blas.get('name')} {blas.get('version')}"}
    out = {"blas": ", ".join(sorted({f"{p.get('internal_api')} {p.get('version')}"
                                     for p in pools}))}
    for p in pools:
        out[f"threads.blas.{p.get('internal_api')}"] = str(p.get("num_threads"))
    return out


def fingerprint(machine_info: Mapping[str, Any]) -> Fingerprint:
    """Flat ``{fact: value}`` of everything that matters for timings and nothing volatile."""
    info = _mlbench(machine_info)
    cpu = _obj(info.get("cpu"))
    flags = cpu.get("simd_flags")
    out: Fingerprint = {
        "cpu.model": str(cpu.get("model")),
        "cpu.simd_flags": ",".join(map(str, flags)) if isinstance(flags, list) else "",
        "cpu.logical_cores": str(cpu.get("logical_cores")),
        "cpu.usable_cores": str(cpu.get("usable_cores")),
        "python": str(_obj(machine_info).get("python_version")),
        **_blas(info),
    }
    out.update({f"threads.{k}": str(v) for k, v in _obj(info.get("threads")).items()})
    out.update({f"version.{k}": str(v) for k, v in _obj(info.get("packages")).items()})
    for i, gpu in enumerate(_objs(info.get("gpus"))):
        out.update({f"gpu{i}.{k}": str(v) for k, v in gpu.items()})
    return out


def differences(baseline: Fingerprint, current: Fingerprint) -> list[str]:
    """``fact: baseline -> current`` for every fact that differs, sorted by fact."""
    keys = sorted(set(baseline) | set(current))
    return [f"{k}: {baseline.get(k, '(absent)')} -> {current.get(k, '(absent)')}"
            for k in keys if baseline.get(k) != current.get(k)]
