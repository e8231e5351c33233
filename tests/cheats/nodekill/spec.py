"""A data-parallel case whose rank 1 process is killed (SIGKILL) at its first timed step, the
other rank waiting for it in a collective (the hook's adapters, hooks.py): the case fails
naming the rank, and no process of it is left behind."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("nodekill", {"jax": "jit", "torch": "eager"}, jax=("jit",), torch=("eager",))
