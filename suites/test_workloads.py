"""Every workload under suites/, in every selected framework, variant, device and precision.

The plugin parametrizes these from the workload specs; each case is checked for correctness
before pytest-benchmark times it (see docs/ARCHITECTURE.md)."""

from __future__ import annotations

from pytest_mlbench.harness import check_reference


def test_reference_gradient(mlbench_workload, mlbench_settings):
    """Each spec's float64 hand gradient agrees with central finite differences."""
    workload, shape = mlbench_workload
    check_reference(workload, shape, mlbench_settings.seed)


def test_train_step(mlbench_case, benchmark):
    """Same start, checked gradient and trajectory, then the timed steady-state step."""
    mlbench_case.run(benchmark)
