"""The control benchmark: a fixed float32 matrix multiply in NumPy, timed in every session
that collects it (suites/test_control.py here; the test_control.py ``pytest-mlbench init``
writes into a user's suites folder). Its GFLOP/s (``extra_info["gflops"]``) says how fast the
machine's BLAS is right now, so ``pytest-mlbench report --machines`` tells a slower machine
from a slower framework: its "control matmuls" are step times divided by this one's
(reporting/machines.py finds it by ``extra_info["control"] == "matmul"``).

Leaf module: NumPy is imported when the benchmark runs, never with the package.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FLOPS", "N", "control_matmul"]

N = 512  # fixed forever: changing it breaks comparisons with every saved run
FLOPS = 2 * N**3


def control_matmul(benchmark: Any) -> None:
    """Time ``a @ b`` (N x N, float32, seeded) with pytest-benchmark's ``benchmark`` fixture,
    check a corner of the product, and record the control's figures in ``extra_info``."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((N, N)).astype(np.float32)
    b = rng.standard_normal((N, N)).astype(np.float32)
    benchmark.group = "control"
    benchmark.extra_info.update({"control": "matmul", "dims": {"n": N}, "dtype": "float32",
                                 "flops_per_step": FLOPS, "steps_per_call": 1})
    out = benchmark(np.matmul, a, b)
    np.testing.assert_allclose(out[:2, :2], a[:2] @ b[:, :2], rtol=1e-4)
    if benchmark.enabled and benchmark.stats:
        seconds = benchmark.stats.stats.median
        benchmark.extra_info.update({"step_s": seconds, "gflops": FLOPS / seconds / 1e9})
