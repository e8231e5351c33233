"""Steps that see a new batch shape once the checked steps are over (the batch repeated: the
same loss and gradient): compiled ones trace and compile again while timed, and eager JAX's
dispatch compiles each primitive for the new shape while timed."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.lin("bugretrace", jax=("eager", "jit"), torch=("jit",), tensorflow=("jit",))
