"""Work owed, not done, in inference and transforms (issue 32): every third call after the
first returns an object whose conversion computes the result."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import infer, load_suite_file, transform

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
SPEC = MODELS.mlp("inferowed", (infer(), transform("vjp")),
                  unsupported={("numpy", "vjp"): "NumPy has no autodiff"},
                  jax=("jit",), numpy=("eager",))
