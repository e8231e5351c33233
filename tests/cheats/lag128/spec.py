"""Behind after step 128 (issue 32): the seed MLP, 16 steps a timed call; once step() has
been called 128 times, params() returns the parameters before the latest step. Every round
then looks like a right step from a state itself a step behind; counted from the seeded start
for the whole run (not only up to 128 steps), the missing step shows."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("lag128", steps_per_call=16, numpy=("eager",))
