"""Every name the docs and the docstrings cite exists: a ``module.Name`` (``case_run.CaseRun``,
``pytest_mlbench.workloads.case.CaseId``, ``campaign._slots``) in README.md,
ADDING_WORKLOADS.md, docs/*.md or a docstring of pytest_mlbench names a module of the package
and something defined in it.

The rule, kept narrow so that prose, JSON paths, variables and other libraries pass:

- a citation is a dotted name whose first word is lowercase, standing alone (not part of a
  path, a URL or a longer dotted name), that starts with ``pytest_mlbench.`` or holds a class
  name (a CamelCase word: ``CaseRun``, ``Side``; not ``T`` or ``MLBENCH``), and whose first
  word is not a name the package or the suites import (``torch.amp.GradScaler``,
  ``nn.Linear``: another library's);
- it must name the package root's public name (``pytest_mlbench.Workload``), or its longest
  prefix must be a module or package of pytest_mlbench, by its dotted path or by its own name
  (``case_run``), the next word defined at the module's top level or in one of its classes (a
  method, an attribute: ``campaign._slots``), and a word after a class in that class. A class
  cited from a module that is gone (``pipeline.CaseRun``) fails there.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "pytest_mlbench"
DOCS = sorted([REPO / "README.md", REPO / "ADDING_WORKLOADS.md", REPO / "CHANGELOG.md",
               *(REPO / "docs").glob("*.md")])
CITATION = re.compile(r"(?<![\w./\\-])([a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?![\w/-])")
CLASS = re.compile(r"^[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$")


@cache
def modules() -> dict[str, Path]:
    """Dotted name (without ``pytest_mlbench.``) -> file; a package -> its __init__.py, or its
    folder when it has none."""
    found: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if len(parts) > 1:
            found.setdefault(".".join(parts[:-1]), path.parent)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


@cache
def imported_names() -> frozenset[str]:
    """Every name an import binds in the package or the suites: other libraries' roots."""
    names: set[str] = set()
    for path in [*PACKAGE.rglob("*.py"), *(REPO / "suites").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
                if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module.split(".")[0])
    return frozenset(names - {"pytest_mlbench", *(m.split(".")[-1] for m in modules())})


def public_names() -> list[str]:
    import pytest_mlbench

    return list(pytest_mlbench.__all__)


@cache
def defined(path: Path) -> dict[str, set[str] | None]:
    """A module's top-level names: a class's own names (methods, attributes, self.x), None for
    anything else."""
    names: dict[str, set[str] | None] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = _members(node)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names[node.name] = None
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(dict.fromkeys((n.id for t in targets for n in ast.walk(t)
                                        if isinstance(n, ast.Name)), None))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update(dict.fromkeys(((a.asname or a.name).split(".")[0]
                                        for a in node.names), None))
    return names


def _members(node: ast.ClassDef) -> set[str]:
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(sub.name)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                and sub.value.id == "self":
            found.add(sub.attr)
    return found


def _candidates(name: str) -> list[str]:
    """The modules a dotted prefix names: its path from the package root, or its own name."""
    if name in modules():
        return [name]
    return [m for m in modules() if "." not in name and m.split(".")[-1] == name]


def problem(citation: str) -> str | None:
    """Why ``citation`` names nothing in the package, or None (found, or not a citation)."""
    words = citation.split(".")
    ours = words[0] == "pytest_mlbench"
    if not ours and (words[0] in imported_names() or not any(map(CLASS.match, words))):
        return None
    words = words[1:] if ours else words
    if ours and len(words) == 1 and words[0] in public_names():
        return None
    for k in range(len(words), 0, -1):
        mods = _candidates(".".join(words[:k]))
        if mods:
            rest = words[k:]
            misses = [why for m in mods if (why := _missing(m, rest))]
            return None if len(misses) < len(mods) else "; ".join(misses)
    return f"no module {words[0]!r} in pytest_mlbench"


def _missing(module: str, rest: list[str]) -> str | None:
    if not rest:
        return None
    if modules()[module].is_dir():  # a package without __init__.py: only its modules
        return f"{module} has no module {rest[0]}"
    names = defined(modules()[module])
    members = [m for m in names.values() if m is not None]
    if rest[0] not in names:
        if any(rest[0] in m for m in members):
            return None  # a method or attribute of one of its classes (campaign._slots)
        return f"{module} defines no {rest[0]}"
    inner = names[rest[0]]
    if len(rest) > 1 and inner is not None and rest[1] not in inner:
        return f"{module}.{rest[0]} has no {rest[1]}"
    return None


def citations() -> Iterator[tuple[str, int, str]]:
    """(where, line, citation) in the docs and in every docstring of the package."""
    for doc in DOCS:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for match in CITATION.finditer(line):
                yield str(doc.relative_to(REPO)), n, match[1]
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                text = ast.get_docstring(node, clean=False) or ""
                for match in CITATION.finditer(text):
                    yield str(path.relative_to(REPO)), getattr(node, "lineno", 1), match[1]


def test_every_module_name_the_docs_and_docstrings_cite_exists() -> None:
    wrong = [f"{where}:{line}: {cited}: {why}" for where, line, cited in citations()
             if (why := problem(cited))]
    assert not wrong, "cited but not there:\n" + "\n".join(wrong)


@pytest.mark.parametrize(("cited", "why"), [
    ("pipeline.CaseRun", "no module 'pipeline' in pytest_mlbench"),  # a module that is gone
    ("case_run.CaseWalk", "measuring.case_run defines no CaseWalk"),
    ("pytest_mlbench.workloads.case.CaseIdent", "workloads.case defines no CaseIdent"),
    ("record.Record.no_such_field", "storing.record.Record has no no_such_field"),
    ("pytest_mlbench.measuring.campaign._no_such", "measuring.campaign defines no _no_such"),
    ("engine.workers.Side", "engine has no module workers"),
    ("pytest_mlbench.control_matmull", "no module 'control_matmull' in pytest_mlbench"),
])
def test_a_citation_of_nothing_is_found(cited: str, why: str) -> None:
    assert problem(cited) == why


@pytest.mark.parametrize("cited", [
    "case_run.CaseRun", "pytest_mlbench.workloads.case.CaseId", "record.Record.identity",
    "pytest_mlbench.measuring.campaign._slots", "pytest_mlbench.reporting.plots",
    "pytest_mlbench.control_matmul", "pytest_mlbench.Workload",  # the root's public names
    "torch.amp.GradScaler", "nn.Linear", "jax.jit",  # other libraries'
    "spec.py", "e.g", "stats.data", "qkv_w.T", "spec.world",  # files, prose, JSON, variables
])
def test_what_is_there_or_is_no_citation_passes(cited: str) -> None:
    assert problem(cited) is None
