"""An eager variant whose step is TorchScript (torch.jit.script): compiled, not op by op."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.lin("eagerscript", torch=("eager",))
