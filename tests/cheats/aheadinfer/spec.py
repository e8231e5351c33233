"""Work done ahead (issue 32, class 3), inference: the answers of a turn's later rounds worked
out in its first round (dropped, never recorded), from every probe key the harness holds in the
worker then, and the later rounds answered by lookup. Keys reach the worker one round at a
time, so a later round's key is never there to be looked up: a round that counts on its
answer having been worked out ahead (specs.AheadAnswers) returns a stale one, and fails its
audit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_mlbench import infer, load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
_SPEC = SPECS.mlp_tasks("aheadinfer", numpy=("eager",), torch=("eager",))
SPEC = replace(_SPEC, tasks=(infer(),), unsupported={})
