"""Honest implementations of every kind: the controls, which must pass."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import adam, infer, load_suite_file, momentum, train, transform

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
SPEC = MODELS.mlp(
    "honest",
    (train(momentum(0.05, 0.9)), train(adam(1e-2)), infer(),
     *(transform(name) for name in ("jvp", "vjp", "hvp", "jacfwd", "jacrev"))),
    unsupported={("numpy", name): "NumPy has no autodiff"
                 for name in ("jvp", "vjp", "hvp", "jacfwd", "jacrev")},
    jax=("eager", "jit"), numpy=("eager",))
