"""Work owed, not done (issue 32): after the checked steps every third step is deferred and
step() and params() return objects whose conversion (__array__, .numpy(), .detach().cpu())
runs it. A harness converting a round's results after its clock timed that work as free;
the results must be the framework's own arrays, made NumPy inside the clock."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.lin("owed", numpy=("eager",), jax=("eager", "jit"), torch=("eager", "jit"),
                 tensorflow=("eager", "jit"))
