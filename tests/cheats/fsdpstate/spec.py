"""JAX fsdp whose optimizer state (Adam's two slots) is placed whole on every device while the
parameters are sharded (the hook's adapter, hooks.py): every number right, the state not
sharded."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pytest_mlbench import adam, load_suite_file, train

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = dataclasses.replace(SPECS.mlp("fsdpstate", {"jax": "jit"}, strategies=("fsdp",),
                                     jax=("jit",)), tasks=(train(adam(1e-3)),))
