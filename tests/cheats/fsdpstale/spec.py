"""torch fsdp whose rank 1, after the checked steps, puts its shards back as they were before each
step (the hook's adapter, hooks.py): the all-gather reads a stale shard."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("fsdpstale", {"torch": "eager"}, strategies=("fsdp",), torch=("eager",))
