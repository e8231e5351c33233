"""Machine id and fingerprint from the ``machine_info["mlbench"]`` facts that machine.py adds.

The id names the hardware (CPU model, usable cores, GPU model) and picks the baselines/<id>/
folder; the fingerprint adds everything else that moves ML timings (SIMD flags, BLAS, thread
settings, framework versions, GPU driver, Python). Volatile readings (clocks, load, host name)
are never part of either, so an unchanged machine always matches itself."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

Fingerprint = dict[str, str]


def slug(text: str) -> str:
    """``Intel(R) Xeon(R) Processor`` -> ``intel-xeon-processor``."""
    text = re.sub(r"\((r|tm|c)\)", "", text.lower())
    return re.sub(r"[^a-z0-9.]+", "-", text).strip("-") or "unknown"


def _mlbench(machine_info: Mapping[str, Any]) -> Mapping[str, Any]:
    return machine_info.get("mlbench") or {}


def machine_id(machine_info: Mapping[str, Any]) -> str:
    """Hardware identity only, so upgrading a framework keeps the same baselines folder."""
    info = _mlbench(machine_info)
    cpu = info.get("cpu", {})
    cores = cpu.get("usable_cores") or cpu.get("logical_cores") or 0
    parts = [slug(str(cpu.get("model", "unknown"))), f"{cores}c"]
    parts += [slug(str(gpu.get("name", "gpu"))) for gpu in info.get("gpus", [])]
    return "-".join(parts)


def fingerprint(machine_info: Mapping[str, Any]) -> Fingerprint:
    """Flat ``{fact: value}`` of everything that matters for timings and nothing volatile."""
    info = _mlbench(machine_info)
    cpu, blas = info.get("cpu", {}), info.get("blas", {})
    out: Fingerprint = {
        "cpu.model": str(cpu.get("model")),
        "cpu.simd_flags": ",".join(cpu.get("simd_flags", [])),
        "cpu.logical_cores": str(cpu.get("logical_cores")),
        "cpu.usable_cores": str(cpu.get("usable_cores")),
        "blas": f"{blas.get('name')} {blas.get('version')}",
        "python": str(machine_info.get("python_version")),
    }
    out.update({f"threads.{k}": str(v) for k, v in info.get("threads", {}).items()})
    out.update({f"version.{k}": str(v) for k, v in info.get("packages", {}).items()})
    for i, gpu in enumerate(info.get("gpus", [])):
        out.update({f"gpu{i}.{k}": str(v) for k, v in gpu.items()})
    return out


def differences(baseline: Fingerprint, current: Fingerprint) -> list[str]:
    """``fact: baseline -> current`` for every fact that differs, sorted by fact."""
    keys = sorted(set(baseline) | set(current))
    return [f"{k}: {baseline.get(k, '(absent)')} -> {current.get(k, '(absent)')}"
            for k in keys if baseline.get(k) != current.get(k)]
