"""Adam without bias correction (NumPy: the update is the implementation's own)."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import adam, load_suite_file, train

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
SPEC = MODELS.mlp("nobias", (train(adam(1e-2)),), numpy=("eager",))
