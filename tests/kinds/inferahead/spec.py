"""Work done ahead (issue 32): build() computes the answers of the probes the harness would
derive from the seed, the workload, the shape and the call's index, and forward() answers
from that table by the probe's bytes, taking the latest answer when a probe is not there (it
trusts its table). Probes keyed by a secret the parent sends as each turn starts are not."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import infer, load_suite_file

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
SPEC = MODELS.mlp("inferahead", (infer(),), jax=("jit",))
