"""Honest parallel controls: dp, fsdp and tp."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("dphonest", {"jax": "jit", "torch": "eager"}, strategies=("dp", "fsdp", "tp"),
                  jax=("jit",), torch=("eager",))
