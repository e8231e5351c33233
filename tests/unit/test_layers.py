"""Dependencies run one way: every module of pytest_mlbench imports only its own package, a
package of a lower layer, or a leaf at the package root (LAYERS, lowest first), and no two
packages import each other, however indirectly. Imports inside functions and under
TYPE_CHECKING count too. The package root itself (its lazy public surface) may be imported
from anywhere."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_mlbench"

# lowest first; a unit (a package, or a module at the root) may import units of its own layer
# or of a layer below it
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "precision", "stats", "tables", "threads", "options", "hookspec", "parallel",
     "timesheet", "variants", "owned", "control", "spread"),  # root leaves
    ("builders",),
    ("frameworks",),
    ("workloads",),
    ("engine",),
    ("checking",),
    ("storing",),
    ("measuring",),
    ("judging",),
    ("reporting",),
    ("parametrize", "session", "plugin", "configfile", "scaffold", "cli", "__main__",
     "__init__", "jobs", "worker"),  # pytest-facing
)
LAYER = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def modules(package: Path) -> dict[str, Path]:
    """Dotted name (without the package's own name) -> file."""
    found = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """The modules of the package that ``name`` imports (dotted, without the package name);
    "" is the package root."""
    known = set(known)
    out: set[str] = set()
    is_init = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = ["pytest_mlbench", *name.split(".")] if name != "__init__" else ["pytest_mlbench"]
                base = base if is_init else base[:-1]
                base = base[:len(base) - (node.level - 1)]
                module = ".".join([*base, module] if module else base)
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}"[15:] in known else module
                       for a in node.names]
        else:
            continue
        for target in targets:
            if target == "pytest_mlbench" or target.startswith("pytest_mlbench."):
                out.add(target[15:])
    return out - {name}


def unit(dotted: str) -> str:
    return dotted.split(".")[0] if dotted else "__init__"


def graph(package: Path) -> dict[str, set[str]]:
    """Module -> the modules it imports."""
    found = modules(package)
    return {name: imports(name, path, found) for name, path in found.items()}


def violations(edges: Mapping[str, Iterable[str]]) -> list[str]:
    """Imports against LAYERS, and modules in no layer."""
    problems = []
    for name, targets in sorted(edges.items()):
        source = unit(name)
        if source not in LAYER:
            problems.append(f"pytest_mlbench.{name}: {source} is in no layer of LAYERS "
                            "(tests/unit/test_layers.py): add it where its imports put it")
            continue
        for target in sorted(targets):
            if not target or unit(target) == source:
                continue  # the public surface, or the unit's own modules
            if unit(target) not in LAYER:
                continue  # reported as its own source
            if LAYER[unit(target)] > LAYER[source]:
                problems.append(f"pytest_mlbench.{name} imports pytest_mlbench.{target}: "
                                f"{source} (layer {LAYER[source]}) may not import "
                                f"{unit(target)} (layer {LAYER[unit(target)]}), a layer above it")
    return problems


def unit_cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Cycles between units (packages and root modules), as strongly connected components."""
    units: dict[str, set[str]] = {}
    for name, targets in edges.items():
        units.setdefault(unit(name), set()).update(
            unit(t) for t in targets if t and unit(t) != unit(name))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(u: str) -> None:
        index[u] = low[u] = len(index)
        stack.append(u)
        for v in units.get(u, ()):
            if v not in index:
                visit(v)
                low[u] = min(low[u], low[v])
            elif v in stack:
                low[u] = min(low[u], index[v])
        if low[u] == index[u]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == u:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for u in sorted(units):
        if u not in index:
            visit(u)
    return found


def test_every_import_runs_down_the_layers() -> None:
    problems = violations(graph(PACKAGE))
    assert not problems, "imports against the layers:\n" + "\n".join(problems)


def test_no_two_packages_import_each_other() -> None:
    cycles = unit_cycles(graph(PACKAGE))
    assert not cycles, f"import cycles between packages: {cycles}"


@pytest.mark.parametrize(("edges", "expected"), [
    ({"checking.asserts": {"measuring.campaign"}}, "checking (layer 5) may not import measuring"),
    ({"errors": {"plugin"}}, "errors (layer 0) may not import plugin"),
    ({"newpackage.mod": {"errors"}}, "newpackage is in no layer"),
])
def test_an_upward_import_or_an_unplaced_module_fails(edges: dict[str, set[str]],
                                                        expected: str) -> None:
    problems = violations(edges)
    assert len(problems) == 1 and expected in problems[0], problems


def test_a_cycle_between_packages_fails() -> None:
    edges = {"storing.record": {"judging.regression"}, "judging.regression": {"storing.record"}}
    assert unit_cycles(edges) == [["judging", "storing"]]


def test_downward_imports_and_the_public_surface_pass() -> None:
    edges = {"measuring.campaign": {"checking.phases", "engine.pools", "errors", ""},
             "checking.asserts": {"checking.trajectory", "workloads.data"}}
    assert violations(edges) == [] and unit_cycles(edges) == []
