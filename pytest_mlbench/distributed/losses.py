"""Where a data-parallel engine finds a workload's loss: ``<dp folder>/<workload>_<framework>.py``
defines ``make_loss(dims)`` returning ``loss(params, **batch)``, a scalar mean over whatever
batch (or shard) it is given, with ``params`` named as the spec names them. Those files reuse
the single-device implementation's functions; the engines add only the parallelism."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_mlbench.catalogue import load_module


def loss_file(folder: Path, workload: str, framework: str) -> Path:
    return folder / f"{workload}_{framework}.py"


def available(folder: Path, framework: str) -> list[str]:
    """Workload names with a data-parallel loss file for ``framework``, in name order."""
    return sorted(p.stem.removesuffix(f"_{framework}")
                  for p in folder.glob(f"*_{framework}.py"))


def load_loss(config: dict[str, Any]) -> Callable[..., Any]:
    """In a worker: the loss named by the config the parent built (see runner.worker_spec)."""
    path = Path(config["loss_path"])
    module = load_module(path, f"mlbench_dp_{path.stem}")
    return module.make_loss(config["dims"])  # type: ignore[no-any-return]
