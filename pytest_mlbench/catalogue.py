"""Finds workloads: every folder under the suites root with a spec.py defining SPEC, and its
impl_<framework>.py files, loaded by path so suites need not be an importable package."""

from __future__ import annotations

import importlib.util
import sys
import zlib
from functools import cache
from pathlib import Path
from types import ModuleType

from pytest_mlbench.workload import Workload


class CatalogueError(Exception):
    """A workload folder that does not follow ADDING_WORKLOADS.md; the message says how."""


def load_module(path: Path, name: str) -> ModuleType:
    """Import a file once per path: the name carries a hash of the path, so two suite roots
    (a user's and the project's, or test copies) never share a module."""
    name = f"{name}_{zlib.crc32(str(path.resolve()).encode()):08x}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CatalogueError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # numba and torch.compile look functions' modules up here
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]  # a failed import must not leave a half-made module behind
        raise
    return module


@cache
def discover(root: Path) -> tuple[Workload, ...]:
    """All workloads under ``root`` in name order; an empty tuple when ``root`` is absent."""
    if not root.is_dir():
        return ()
    return tuple(load_workload(folder) for folder in sorted(root.iterdir())
                 if (folder / "spec.py").is_file())


def load_workload(folder: Path) -> Workload:
    """The SPEC of one workload folder, checked against the folder's files."""
    module = load_module(folder / "spec.py", f"mlbench_suite_{folder.name}_spec")
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, Workload):
        raise CatalogueError(f"{folder / 'spec.py'}: defines no SPEC = Workload(...)")
    if spec.name != folder.name:
        raise CatalogueError(f"{folder / 'spec.py'}: SPEC.name {spec.name!r} must match the "
                             f"folder name {folder.name!r}")
    check_files(folder, spec)
    return spec


def check_files(folder: Path, spec: Workload) -> None:
    """Every declared implementation has its file and every file is declared: nothing is
    silently left out of the comparison."""
    files = {p.stem.removeprefix("impl_") for p in folder.glob("impl_*.py")}
    declared = set(spec.implementations)
    if files - declared:
        raise CatalogueError(f"{folder}: impl_{sorted(files - declared)[0]}.py is not declared "
                             f"in SPEC.implementations")
    if declared - files:
        raise CatalogueError(f"{folder}: SPEC.implementations names "
                             f"{sorted(declared - files)[0]} but impl_{sorted(declared - files)[0]}"
                             ".py is missing")


def implementation(root: Path, spec: Workload, framework: str) -> ModuleType:
    folder = root / spec.name
    module = load_module(folder / f"impl_{framework}.py", f"mlbench_suite_{spec.name}_{framework}")
    if not callable(getattr(module, "build", None)):
        raise CatalogueError(f"{folder}/impl_{framework}.py: defines no build(case)")
    return module
