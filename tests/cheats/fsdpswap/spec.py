"""torch fsdp whose rank 1 holds rank 0's shards after every step past the checked ones (the
hook's adapter, hooks.py): the gathered parameters repeat rank 0's rows."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("fsdpswap", {"torch": "eager"}, strategies=("fsdp",), torch=("eager",))
