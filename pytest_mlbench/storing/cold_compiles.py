"""What the compile cache's folder remembers of each case (``cold.json`` beside the caches):
whether a run compiled the case into the folder already (``filled``, the versions and code it
was compiled from), and its cold compile time, the first process's seconds when it compiled
from nothing (with the versions it was measured at and when).

A run whose compile figure came from the cache reports that cold figure beside it; a run that
compiled a case cold keeps its figure here (the latest measured, while the framework's versions
hold). The campaign asks ``filled`` to know whether XLA's cache holds every case of a framework
(measuring/cache_plan.py). Sessions sharing the folder update the file under a lock, each
adding its own entries to what is there, written whole (a temporary file, then renamed). A file
that cannot be read is set aside like any other unreadable part of the cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from pytest_mlbench.storing import compile_cache

FILE = compile_cache.LEDGER
VERSION = 1
# the distributions whose versions a framework's compiled code depends on
DISTRIBUTIONS = {"numpy": ("numpy",), "numba": ("numba", "llvmlite", "numpy"),
                 "autograd": ("autograd", "numpy"), "jax": ("jax", "jaxlib"),
                 "torch": ("torch", "torch-xla"),
                 "tensorflow": ("tensorflow", "tensorflow-cpu", "keras")}


@cache
def versions(framework: str) -> dict[str, str]:
    """The installed versions of ``framework``'s distributions, and Python's."""
    found = {"python": sys.version.split()[0]}
    for name in DISTRIBUTIONS.get(framework, (framework,)):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    return found


@cache
def package_digest() -> str:
    """This package's own source: the builders and adapters shape what a case compiles."""
    return _digest(sorted(Path(__file__).resolve().parents[1].rglob("*.py")))


def folder_digest(folders: Iterable[Path]) -> str:
    """A workload's source (its folder, and the one its implementations come from)."""
    return _digest(sorted(p for folder in folders for p in Path(folder).glob("*.py")))


def _digest(paths: Iterable[Path]) -> str:
    sha = hashlib.sha256()
    for path in paths:
        sha.update(path.name.encode() + b"\0" + path.read_bytes())
    return sha.hexdigest()[:16]


def fill_key(framework: str, code: str) -> str:
    """What a case was compiled from: the framework's versions, this package and the workload."""
    text = json.dumps([versions(framework), package_digest(), code], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def case_key(name: str, dims: Mapping[str, int]) -> str:
    """A case at one size: its id and its dimensions (smoke and default share ids)."""
    return f"{name} " + ",".join(f"{k}={v}" for k, v in sorted(dims.items()))


class Ledger:
    """The folder's cold.json: read at a run's start, updated at its end (``save``)."""

    def __init__(self, folder: str, entries: dict[str, dict[str, Any]] | None = None) -> None:
        self.path = Path(folder) / FILE
        self.entries = entries or {}
        self.changed: dict[str, dict[str, Any]] = {}

    @classmethod
    def load(cls, folder: str) -> tuple[Ledger, str]:
        """The folder's ledger, and a line when its file was unreadable (set aside)."""
        ledger = cls(folder)
        try:
            ledger.entries = _entries(ledger.path)
        except ValueError as exc:
            where = compile_cache.set_aside(ledger.path)
            return ledger, (f"mlbench: the compile cache's {FILE} ({ledger.path}) cannot be "
                            f"read ({exc}): set aside as {where}; cold figures start afresh")
        return ledger, ""

    @classmethod
    def peek(cls, folder: str) -> Ledger:
        """The folder's ledger as it is, read only (an unreadable one: empty)."""
        try:
            return cls(folder, _entries(Path(folder) / FILE))
        except ValueError:
            return cls(folder)

    def filled(self, key: str, fill: str) -> bool:
        return self.entries.get(key, {}).get("filled") == fill

    def cold_s(self, key: str, framework: str) -> float | None:
        """The case's cold compile time, measured at the versions installed now (or None)."""
        entry = self.entries.get(key, {})
        if entry.get("versions") != versions(framework):
            return None
        value = entry.get("cold_s")
        return float(value) if isinstance(value, int | float) else None

    def note(self, key: str, framework: str, fill: str, cold_s: float | None) -> None:
        """The case was compiled into the folder from ``fill``; ``cold_s``: from nothing."""
        entry = {**self.entries.get(key, {}), "framework": framework, "filled": fill}
        if cold_s is not None:
            entry.update(cold_s=round(cold_s, 4), versions=versions(framework),
                         measured=time.strftime("%Y-%m-%d"))
        self.entries[key] = self.changed[key] = entry

    def forget(self, framework: str) -> None:
        """``framework``'s cache was set aside: nothing of it is filled any more."""
        for key, entry in self.entries.items():
            if entry.get("framework") == framework and entry.get("filled"):
                self.entries[key] = self.changed[key] = {**entry, "filled": ""}

    def save(self) -> None:
        """This run's entries added to the file as it is now (other runs may have written)."""
        if not self.changed:
            return
        with _locked(self.path):
            try:
                now = _entries(self.path)
            except ValueError:
                now = {}
            now.update(self.changed)
            partial = self.path.with_name(f".{FILE}.{os.getpid()}.partial")
            partial.write_text(json.dumps({"version": VERSION, "cases": now}, indent=1,
                                          sort_keys=True))
            os.replace(partial, self.path)
        self.changed = {}


def _entries(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(str(exc)) from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, dict) or data.get("version") != VERSION or not all(
            isinstance(v, dict) for v in cases.values()):
        raise ValueError(f"not a version-{VERSION} ledger of cases")
    return cases


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path.with_name(f".{FILE}.lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
