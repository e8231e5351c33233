"""Plain NumPy: the CPU reference point, eager only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_mlbench import threads as threading_
from pytest_mlbench.frameworks.base import (
    Compiled,
    best_gflops,
    eager_only,
    no_donation,
    package_versions,
    require_cpu_policy,
    tracemalloc_peak,
)
from pytest_mlbench.precision import Policy


def _numpy_types() -> tuple[type, ...]:
    """NumPy's arrays and the scalar types a loss may come back as."""
    scalars: tuple[type, ...] = (np.float16, np.float32, np.float64, np.longdouble, np.int8,
                                 np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                 np.uint64, np.bool_)
    try:
        import ml_dtypes

        scalars += (ml_dtypes.bfloat16,)
    except ImportError:  # bfloat16 cases need ml_dtypes; without it there are none
        pass
    return (np.ndarray, *scalars)


NUMPY_TYPES = _numpy_types()


class NumpyAdapter:
    name = "numpy"
    modules: tuple[str, ...] = ("numpy",)
    extra = ""
    variants: tuple[str, ...] = ("eager",)

    def __init__(self) -> None:
        self._limit: Any = None

    def devices(self) -> dict[str, str]:
        return {"cpu": "host CPU"}

    def setup(self, device: str, policy: Policy, seed: int) -> None:
        # Inputs come from the harness's seeded Generator; there is no global state to seed.
        require_cpu_policy(self.name, device, policy)

    def verify_policy(self, policy: Policy) -> None:
        """NumPy has no global precision setting: the dtype checks of the arrays suffice."""

    def set_threads(self, threads: int) -> None:
        self._limit = threading_.limit_blas(threads)  # held for the worker's lifetime

    def threads(self) -> dict[str, Any]:
        return threading_.blas_threads()

    def compile_events(self) -> int:
        return 0  # NumPy never compiles

    def census(self, root: Any) -> tuple[int, str] | None:
        return None  # plain arrays: nothing the framework calls trainable

    def asarray(self, array: np.ndarray) -> Any:
        return np.array(array, copy=True)

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.array(value, copy=True)

    def take(self, value: Any, rows: np.ndarray) -> Any:
        return value[rows]

    def concrete_types(self) -> tuple[type, ...]:
        """What a timed call may return: NumPy arrays and NumPy scalars (a loss)."""
        return NUMPY_TYPES

    def sync(self, value: Any) -> None:
        """NumPy is synchronous."""

    def compile(self, fn: Callable[..., Any], variant: str,
                donate: tuple[int, ...] = ()) -> Compiled:
        no_donation(self.name, donate)
        return eager_only(self.name, fn, variant)

    def matmul_gflops(self, dtype: str, n: int, repeats: int) -> float | None:
        if dtype not in ("float32", "float64"):
            return None
        rng = np.random.default_rng(0)
        a, b = (rng.standard_normal((n, n)).astype(dtype) for _ in range(2))
        return best_gflops(lambda: a @ b, lambda _: None, 2.0 * n**3, repeats)

    def versions(self) -> dict[str, str]:
        return package_versions("numpy")

    def peak_memory(self, run: Callable[[], None]) -> tuple[int, str] | None:
        return tracemalloc_peak(run)
