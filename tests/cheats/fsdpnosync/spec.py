"""torch fsdp whose ranks turn FSDP2's gradient reduce-scatter off after the checked steps (the
hook's adapter, hooks.py)."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("fsdpnosync", {"torch": "eager"}, strategies=("fsdp",), torch=("eager",))
