"""Claims fsdp and runs the replicated data-parallel engine (the hook's adapters, hooks.py): every
number right, nothing sharded."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("fsdpwhole", {"jax": "jit", "torch": "eager"}, strategies=("fsdp",),
                  jax=("jit",), torch=("eager",))
