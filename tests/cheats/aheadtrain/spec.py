"""Work done ahead (issue 32, class 3), training: build() runs the honest trainer steps ahead
on the seeded data and a timed step is a lookup of the state it should reach
(specs.AheadSteps). Each timed step's batch is drawn from a secret sent only with its round,
so the audited round's steps differ from the reference's on those batches."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.lin("aheadtrain", numpy=("eager",), torch=("eager",), jax=("eager",))
