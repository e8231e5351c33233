"""The control benchmark: a fixed float32 matrix multiply in NumPy, timed in every session.

Its GFLOP/s (``extra_info["gflops"]``) says how fast this machine's BLAS is right now, so a
report can tell a slower machine from a slower framework and normalise step times across
machines (``mlbench report --machines``). Keep it in any ``-k`` selection: ``-k "control or
..."``; it is part of the main job (``-m mlbench_main``)."""

from __future__ import annotations

import numpy as np
import pytest

N = 512  # fixed forever: changing it breaks comparisons with every saved run
FLOPS = 2 * N**3


@pytest.mark.mlbench_main
def test_control_matmul(benchmark):
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
