"""The audit announces itself (issue 32): after the checked steps, a step reads the harness's
frames for whether the round under way is kept for the audit, and steps only then; where it
finds nothing to read, it takes the round as unread and skips the step. Every round must look
alike from inside the worker, so it skips in the rounds that are audited too."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.lin("peek", numpy=("eager",), jax=("jit",), torch=("eager",),
                 tensorflow=("jit",))
