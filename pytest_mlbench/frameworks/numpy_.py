"""Plain NumPy: the CPU reference point, eager only."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_mlbench.frameworks.base import (
    Compiled,
    eager_only,
    package_versions,
    require_cpu_policy,
    tracemalloc_peak,
)
from pytest_mlbench.precision import Policy

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class NumpyAdapter:
    name = "numpy"
    modules: tuple[str, ...] = ("numpy",)
    extra = ""
    variants: tuple[str, ...] = ("eager",)

    def devices(self) -> dict[str, str]:
        return {"cpu": "host CPU"}

    def setup(self, device: str, policy: Policy, seed: int) -> None:
        # Inputs come from the harness's seeded Generator; there is no global state to seed.
        require_cpu_policy(self.name, device, policy)

    def asarray(self, array: np.ndarray) -> Any:
        return np.array(array, copy=True)

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def sync(self, value: Any) -> None:
        """NumPy is synchronous."""

    def compile(self, fn: Callable[..., Any], variant: str) -> Compiled:
        return eager_only(self.name, fn, variant)

    def versions(self) -> dict[str, str]:
        return package_versions("numpy")

    def peak_memory(self, run: Callable[[], None]) -> tuple[int, str] | None:
        return tracemalloc_peak(run)

    def threads(self) -> dict[str, Any]:
        return {var: os.environ.get(var, "unset") for var in THREAD_VARS}
