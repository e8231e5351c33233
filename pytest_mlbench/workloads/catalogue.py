"""Finds workloads: every folder under the suites root with a spec.py defining SPEC, and its
impl_<framework>.py files, loaded by path so suites need not be an importable package.

Discovery never stops at the first problem: every folder is read, every rule it breaks is
reported as one line naming the file (``Problem``), and the folders that are fine are
collected as usual. A broken folder shows up as one failing case that lists its problems.
"""

from __future__ import annotations

import ast
import importlib.util
import math
import sys
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_mlbench.workloads.spec import Workload, variants_of


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
    if not rules:  # the data's own rules read the fields the spec's rules checked
        problems += data_problems(spec_file, spec)
    return spec, problems


def data_problems(spec_file: Path, spec: Workload) -> list[Problem]:
    """What the spec's data functions break, found without running a case: make_data and
    make_params called on its smallest smoke shape must return dicts of arrays, and a training
    step's batch must be drawable from the data (data.assert_drawable: the arrays of a row group
    share a first axis). One line, naming the spec file, at collection; a case would find it
    only at its first audited round, minutes later."""
    from pytest_mlbench.errors import SpecError
    from pytest_mlbench.precision import POLICIES
    from pytest_mlbench.workloads import data

    shape = min(spec.sizes["smoke"], key=lambda s: math.prod(s.dims.values()))
    try:
        inputs, _ = data.seeded_start(spec, shape, 0, POLICIES["fp64"])
        if any(task.kind == "train" for task in spec.all_tasks):  # training draws batches
            data.assert_drawable(spec, shape, inputs)
    except SpecError as exc:
        return [Problem(spec_file, str(exc))]
    except Exception as exc:  # noqa: BLE001 - the spec's data, reported as this folder's
        return [Problem(spec_file, f"its data at {dict(shape.dims)} could not be made "
                                   f"({type(exc).__name__}: {exc})")]
    return []


def file_problems(folder: Path, spec: Workload, frameworks: tuple[str, ...]) -> list[Problem]:
    """Every declared implementation has its file (here, or in the folder named by
    ``implementations_from``) and every file here is declared: nothing is silently left out
    of the comparison; and every framework named is one that exists."""
    files = impl_names(folder)
    inherited, out = source_problems(folder, spec, files)
    declared = set(spec.implementations)
    for name in sorted(files - declared):
        out.append(Problem(folder / f"impl_{name}.py", "is not declared in SPEC.implementations"))
    for name in sorted(declared - files - inherited):
        where = f" (nor in {spec.implementations_from}/)" if spec.implementations_from else ""
        out.append(Problem(folder / f"impl_{name}.py", f"is missing{where}, but "
                                                       f"SPEC.implementations names {name!r}"))
    declared_parallel = spec.parallel if isinstance(spec.parallel, Mapping) and all(
        isinstance(v, Mapping) for v in spec.parallel.values()) else {}  # else a type rule's
    named = {fw for by_fw in declared_parallel.values() for fw in by_fw}
    for name in sorted(set(declared) | named):
        if name not in frameworks:
            out.append(Problem(folder / "spec.py", f"names framework {name!r}, which no adapter "
                                                   f"provides (known: {', '.join(frameworks)})"))
    for strategy, by_fw in declared_parallel.items():
        for name, declared_variants in by_fw.items():
            for variant in variants_of(declared_variants):
                if variant not in spec.implementations.get(name, ()):
                    out.append(Problem(folder / "spec.py", f"parallel[{strategy!r}][{name!r}]: "
                                       f"{variant!r} is not a variant its implementations "
                                       "declare"))
    return out


def impl_names(folder: Path) -> set[str]:
    return {p.stem.removeprefix("impl_") for p in folder.glob("impl_*.py")}


def source_problems(folder: Path, spec: Workload,
                    own: set[str]) -> tuple[set[str], list[Problem]]:
    """The frameworks ``implementations_from`` serves (those with a file there and none
    here), or one line saying why its value names no usable folder."""
    name = spec.implementations_from
    if not isinstance(name, str) or Path(name).name != name or not name:
        return set(), []  # None, or a value the spec's own rules have reported
    spec_file = folder / "spec.py"
    source = folder.parent / name
    if name == folder.name:
        return set(), [Problem(spec_file, f"implementations_from={name!r} names this folder "
                                          "itself; name the workload whose impl files it reuses")]
    if not (source / "spec.py").is_file():
        return set(), [Problem(spec_file, f"implementations_from={name!r} names no workload "
                                          f"folder beside this one ({source} has no spec.py)")]
    served = (impl_names(source) - own) & set(spec.implementations)
    if not served:
        return set(), [Problem(spec_file, f"implementations_from={name!r} serves no framework: "
                                          "every declared implementation has its own file here "
                                          "or none there; remove the field")]
    return served, []


def implementation_path(root: Path, spec: Workload, framework: str) -> Path:
    """The workload's own impl_<framework>.py, else the one of ``implementations_from``."""
    own = root / spec.name / f"impl_{framework}.py"
    if own.is_file() or not spec.implementations_from:
        return own
    return root / spec.implementations_from / f"impl_{framework}.py"


def implementation(root: Path, spec: Workload, framework: str) -> ModuleType:
    path = implementation_path(root, spec, framework)
    module = load_suite_file(path)
    if not callable(getattr(module, "build", None)) and not callable(
            getattr(module, "data_parallel_loss", None)):
        raise CatalogueError(f"{path}: defines no build(case)")
    return module


def data_parallel_loss(module: ModuleType, case: Any) -> Callable[..., Any] | None:
    """``loss(params, *data)`` over one data-parallel shard: the module's own
    ``data_parallel_loss(case)`` where it defines one, else its functional model's loss (the
    spec's flat params through ``to_model``, the shard's arrays named as the case's data).
    None: the module has neither. A mean loss, so the all-reduce's average of the shards'
    gradients is the global batch's."""
    own = getattr(module, "data_parallel_loss", None)
    if callable(own):
        return own(case)  # type: ignore[no-any-return]
    model = getattr(getattr(module, "build", None), "model", None)
    loss = getattr(model, "loss", None)
    if model is None or loss is None:
        return None
    keys = tuple(case.data)

    def shard_loss(flat: Any, *arrays: Any) -> Any:
        return loss(model.tree(flat), dict(zip(keys, arrays, strict=True)))

    return shard_loss


def unsupported_at(folder: Path, spec: Workload, *parts: str) -> tuple[Path, int] | None:
    """Where the spec's ``unsupported`` entry matching ``parts`` (a case's framework, variant,
    device, precision, task) is written: the file and line of its key, in the workload's
    spec.py or the spec of the folder it reuses; None when no entry matches or its key is
    not written out as a literal."""
    key = next((k for k in spec.unsupported if set(k) <= set(parts)), None)
    if key is None:
        return None
    files = [folder / "spec.py"]
    if spec.implementations_from:
        files.append(folder.parent / spec.implementations_from / "spec.py")
    for path in files:
        line = _literal_line(path, key)
        if line is not None:
            return path, line
    return None


def _literal_line(path: Path, key: tuple[str, ...]) -> int | None:
    """The line of the first dict key in ``path`` written as a literal equal to ``key``."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        for k in node.keys if isinstance(node, ast.Dict) else ():
            try:
                if k is not None and ast.literal_eval(k) == key:
                    return k.lineno
            except (ValueError, TypeError, SyntaxError, RecursionError):
                continue
    return None


def load_workload(folder: Path) -> Workload:
    """The SPEC of one workload folder; CatalogueError listing every problem it has."""
    spec, problems = read_folder(folder, ())
    problems = [p for p in problems if "which no adapter provides" not in p.rule]
    if spec is None or problems:
        raise CatalogueError("; ".join(str(p) for p in problems))
    return spec
