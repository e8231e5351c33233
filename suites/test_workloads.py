"""Every workload under suites/, in every selected framework, variant, device, precision and
worker count.

The plugin parametrizes these from the workload specs; each case is built in a worker process
of its framework, checked before, while and after it is timed, and timed in several fresh
processes (see docs/ARCHITECTURE.md)."""

from __future__ import annotations


def test_reference(mlbench_workload):
    """Each workload's float64 reference agrees with finite differences of its model."""
    mlbench_workload.verify()


def test_case(mlbench_case, benchmark):
    """Same start, checked result, audited timed rounds, checks after timing."""
    mlbench_case.run(benchmark)
