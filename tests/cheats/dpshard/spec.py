"""Data-parallel steps on part of the batch after the checked steps: torch's rank 1 on half of
its shard (its data_parallel_loss counts calls), JAX's Mesh step on half of the global batch
(a second jitted step, warmed up in build, from the hook's adapter)."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp(
    "dpshard", {"jax": "jit", "torch": "eager"}, jax=("jit",), torch=("eager",))
