"""Machine facts (py-cpuinfo, threadpoolctl), the machine id and the fingerprint."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from pytest_mlbench.storing import fingerprint, machine
from tests.synthetic import MACHINE

MAC = {"brand_raw": "Apple M2 Pro", "arch": "ARM_8", "flags": ["asimd", "fp", "neon"]}
WINDOWS = {"brand_raw": "Intel(R) Core(TM) i7-10700 CPU @ 2.90GHz", "arch": "X86_64",
           "flags": ["avx", "avx2", "fma", "sse4_2", "tsc"]}


@pytest.mark.parametrize(("info", "model", "flags"), [
    (MAC, "Apple M2 Pro", ["asimd", "neon"]),
    (WINDOWS, "Intel(R) Core(TM) i7-10700 CPU @ 2.90GHz", ["avx", "avx2", "fma", "sse4_2"]),
    ({}, "unknown", []),
])
def test_cpu_model_and_flags_come_from_py_cpuinfo(info: dict[str, Any], model: str,
                                                  flags: list[str]) -> None:
    cpu = machine.cpu_info(info)
    assert cpu["model"] == model and cpu["simd_flags"] == flags
    assert cpu["logical_cores"] == os.cpu_count()


def test_machine_id_of_another_os_names_its_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "_cpuinfo", lambda: MAC)
    info = {"mlbench": machine.machine_info()}
    assert re.fullmatch(r"apple-m2-pro-\d+c", fingerprint.machine_id(info))


def test_this_machines_id_keeps_its_form() -> None:
    info = {"mlbench": machine.machine_info()}
    cores = machine.usable_cores() or os.cpu_count()
    assert fingerprint.machine_id(info) == (
        f"{fingerprint.slug(machine.cpu_info()['model'])}-{cores}c"
        + "".join(f"-{fingerprint.slug(g['name'])}" for g in machine.gpu_info()))


def test_blas_is_what_is_loaded_with_its_threads() -> None:
    info = machine.machine_info()  # one reading (a campaign beside this test may limit BLAS)
    pools = info["threadpools"]
    blas = [p for p in pools if p["user_api"] == "blas"]
    assert blas, "NumPy's BLAS is loaded in every process that imports numpy"
    assert all(isinstance(p["num_threads"], int) and p["version"] for p in blas)
    assert machine.blas_info(pools)["name"] == blas[0]["internal_api"]
    facts = fingerprint.fingerprint({"mlbench": info})
    assert facts["blas"].startswith(blas[0]["internal_api"])
    assert facts[f"threads.blas.{blas[0]['internal_api']}"] == str(blas[0]["num_threads"])


def test_fingerprint_ignores_volatile_facts_and_lists_differences() -> None:
    info = {"python_version": "3.11.0", "mlbench": dict(MACHINE)}
    noisy = {**info, "node": "other-host", "cpu": {"hz_actual": [3.1e9, 0]}}
    assert fingerprint.fingerprint(noisy) == fingerprint.fingerprint(info)
    newer = {**info, "mlbench": {**MACHINE, "packages": {"jax": "0.5"}}}
    assert fingerprint.differences(fingerprint.fingerprint(info),
                                   fingerprint.fingerprint(newer)) == [
        "version.jax: (absent) -> 0.5"]
    assert fingerprint.machine_id(info) == "test-cpu-2c"


def test_old_files_without_threadpools_still_fingerprint() -> None:
    old = {"mlbench": {"blas": {"name": "scipy-openblas", "version": "0.3.27"}}}
    assert fingerprint.fingerprint(old)["blas"] == "scipy-openblas 0.3.27"


@pytest.mark.parametrize("bad", [
    {"mlbench": {"cpu": "x", "gpus": "y", "threadpools": 3, "threads": [], "packages": 5}},
    {"mlbench": {"cpu": {"simd_flags": "avx"}, "gpus": [1, "a"], "threadpools": [None]}},
    {"mlbench": 3}, [], None,
])
def test_wrong_types_read_as_absent_never_raise(bad: Any) -> None:
    assert fingerprint.machine_id(bad).endswith("-0c")
    assert fingerprint.fingerprint(bad)["cpu.model"] == "None"
