"""The audit announces itself, in inference (issue 32): forward() reads its callers' frames
for whether the round under way keeps this call's output (a ``keep`` naming the round and
call) and computes only then, answering zeros otherwise; where it finds nothing to read it
takes the call as unread."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import infer, load_suite_file

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
SPEC = MODELS.mlp("inferpeek", (infer(),), jax=("jit",))
