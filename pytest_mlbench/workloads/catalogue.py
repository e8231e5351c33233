"""Finds workloads: every folder under the suites root with a spec.py defining SPEC, and its
impl_<framework>.py files, loaded by path so suites need not be an importable package.

Discovery never stops at the first problem: every folder is read, every rule it breaks is
reported as one line naming the file (``Problem``), and the folders that are fine are
collected as usual. A broken folder shows up as one failing case that lists its problems.
"""

from __future__ import annotations

import importlib.util
import sys
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from pytest_mlbench.workloads.spec import Workload


class CatalogueError(Exception):
    """A workload folder that does not follow ADDING_WORKLOADS.md; the message says how."""


@dataclass(frozen=True)
class Problem:
    path: Path
    rule: str

    def __str__(self) -> str:
        return f"{self.path}: {self.rule}"


@dataclass(frozen=True)
class Catalogue:
    root: Path
    workloads: tuple[Workload, ...] = ()
    problems: tuple[Problem, ...] = ()
    folders: dict[str, Path] = field(default_factory=dict)

    def folder(self, name: str) -> Path:
        return self.folders.get(name, self.root / name)

    def problems_of(self, folder: Path) -> list[Problem]:
        return [p for p in self.problems if p.path == folder or folder in p.path.parents]


def module_name(path: Path) -> str:
    """A module name of its own per file: two suite roots (a user's and the project's, test
    copies) never share a module, and every loader of one file gets one module object."""
    path = path.resolve()
    return (f"mlbench_suite_{path.parent.name}_{path.stem}_"
            f"{zlib.crc32(str(path).encode()):08x}")


def load_suite_file(path: Path | str) -> ModuleType:
    """Import a suite file (spec.py, impl_<framework>.py, a helper beside them) once per
    path. Implementation files use it to reach their spec or another workload's:
    ``load_suite_file(Path(__file__).with_name("spec.py"))``."""
    path = Path(path)
    name = module_name(path)
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


def discover(root: Path, frameworks: Iterable[str]) -> Catalogue:
    """Every workload under ``root`` in name order, and every problem found on the way."""
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        return Catalogue(root, problems=(Problem(root, f"the suites folder {what}; set the ini "
                                                       "value mlbench_suites to the folder "
                                                       "holding the workload folders"),))
    known = tuple(frameworks)
    workloads, problems, folders = [], [], {}
    for folder in sorted(p for p in root.iterdir() if (p / "spec.py").is_file()):
        spec, found = read_folder(folder, known)
        problems += found
        if spec is not None and not found:
            workloads.append(spec)
            folders[spec.name] = folder
    return Catalogue(root, tuple(workloads), tuple(problems), folders)


def read_folder(folder: Path, frameworks: tuple[str, ...]) -> tuple[Workload | None,
                                                                        list[Problem]]:
    spec_file = folder / "spec.py"
    try:
        module = load_suite_file(spec_file)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit included: a spec.py must not end the session
        return None, [Problem(spec_file, f"importing it raised {type(exc).__name__}: {exc}")]
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, Workload):
        return None, [Problem(spec_file, "defines no SPEC = Workload(...)")]
    try:
        rules = spec.problems()
    except Exception as exc:  # noqa: BLE001 - a spec the rules cannot read is this folder's
        rules = [f"checking SPEC raised {type(exc).__name__}: {exc}"]
    problems = [Problem(spec_file, rule) for rule in rules]
    if not isinstance(spec.name, str) or not isinstance(spec.implementations, dict | Mapping):
        return spec, problems  # the rules below read these two
    if spec.name != folder.name:
        problems.append(Problem(spec_file, f"SPEC.name {spec.name!r} must match the folder "
                                           f"name {folder.name!r}"))
    problems += file_problems(folder, spec, frameworks)
    return spec, problems


def file_problems(folder: Path, spec: Workload, frameworks: tuple[str, ...]) -> list[Problem]:
    """Every declared implementation has its file and every file is declared: nothing is
    silently left out of the comparison; and every framework named is one that exists."""
    out = []
    files = {p.stem.removeprefix("impl_") for p in folder.glob("impl_*.py")}
    declared = set(spec.implementations)
    for name in sorted(files - declared):
        out.append(Problem(folder / f"impl_{name}.py", "is not declared in SPEC.implementations"))
    for name in sorted(declared - files):
        out.append(Problem(folder / f"impl_{name}.py", f"is missing, but SPEC.implementations "
                                                       f"names {name!r}"))
    for name in sorted(set(declared) | set(spec.data_parallel)):
        if name not in frameworks:
            out.append(Problem(folder / "spec.py", f"names framework {name!r}, which no adapter "
                                                   f"provides (known: {', '.join(frameworks)})"))
    for name, variant in spec.data_parallel.items():
        if variant not in spec.implementations.get(name, ()):
            out.append(Problem(folder / "spec.py", f"data_parallel[{name!r}] = {variant!r} is "
                                                   "not a variant its implementations declare"))
    return out


def implementation(root: Path, spec: Workload, framework: str) -> ModuleType:
    folder = root / spec.name
    module = load_suite_file(folder / f"impl_{framework}.py")
    if not callable(getattr(module, "build", None)) and not callable(
            getattr(module, "data_parallel_loss", None)):
        raise CatalogueError(f"{folder}/impl_{framework}.py: defines no build(case)")
    return module


def load_workload(folder: Path) -> Workload:
    """The SPEC of one workload folder; CatalogueError listing every problem it has."""
    spec, problems = read_folder(folder, ())
    problems = [p for p in problems if "which no adapter provides" not in p.rule]
    if spec is None or problems:
        raise CatalogueError("; ".join(str(p) for p in problems))
    return spec
