"""Baselines on pytest-benchmark's own file storage: baselines/<machine-id>/NNNN_<name>.json.

``BaselineStorage`` is pytest-benchmark's ``FileStorage`` (so ``pytest-benchmark --storage
baselines compare`` and ``list`` read what it writes) with three guarantees added: writes are
atomic (temp file + ``os.replace``, an interrupted save leaves the old file whole), an existing
name is never overwritten unless asked, and a malformed file is a one-line ``BaselineError``
naming it instead of a logged-and-skipped warning."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_benchmark.storage.file import FileStorage
from pytest_benchmark.utils import safe_dumps

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class BaselineError(Exception):
    """A baseline that cannot be read, found or written; the message names the file."""


class _QuietLogger:
    def info(self, text: str, **_: Any) -> None:
        pass

    def warning(self, text: str, **_: Any) -> None:
        pass


def atomic_write(path: Path, payload: bytes) -> None:
    """Write ``payload`` to a temp file beside ``path``, fsync it, then rename over ``path``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; baselines are shared and committed
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_run(path: Path) -> dict[str, Any]:
    """A saved run, checked enough that later code can trust its shape."""
    try:
        run = json.loads(Path(path).read_text(encoding="utf8"))
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such baseline file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineError(f"{path}: not a readable pytest-benchmark JSON file ({exc})") from None
    problem = _shape_problem(run)
    if problem:
        raise BaselineError(f"{path}: not a pytest-benchmark run ({problem})")
    return run


def _shape_problem(run: Any) -> str | None:
    if not isinstance(run, dict) or not isinstance(run.get("benchmarks"), list):
        return "no 'benchmarks' list"
    for i, bench in enumerate(run["benchmarks"]):
        stats = bench.get("stats") if isinstance(bench, dict) else None
        if not isinstance(stats, dict) or not isinstance(bench.get("fullname"), str):
            return f"benchmark #{i} lacks 'fullname' or 'stats'"
        data = stats.get("data", [])
        if not isinstance(data, list) or not all(isinstance(x, int | float) for x in data):
            return f"benchmark {bench['fullname']!r} has non-numeric rounds"
    return None


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise BaselineError(f"baseline name {name!r}: use letters, digits, '.', '_' and '-'")
    return name


class BaselineStorage(FileStorage):  # type: ignore[misc]
    """pytest-benchmark's FileStorage rooted at ``root`` for one machine id."""

    def __init__(self, root: Path | str, machine_id: str, logger: Any = None) -> None:
        super().__init__(root, logger or _QuietLogger(), default_machine_id=machine_id)

    @property
    def folder(self) -> Path:
        return Path(self.path) / self.default_machine_id

    def existing(self, name: str) -> Path | None:
        """The newest ``NNNN_<name>.json`` in this machine's folder."""
        if not self.folder.is_dir():
            return None
        found = sorted(p for p in self.folder.glob(f"[0-9][0-9][0-9][0-9]_{name}.json"))
        return found[-1] if found else None

    def target(self, name: str, overwrite: bool) -> Path:
        """Where ``name`` would be saved; BaselineError when it exists and overwrite is off."""
        check_name(name)
        old = self.existing(name)
        if old is not None and not overwrite:
            raise BaselineError(f"{old}: baseline {name!r} exists; pass "
                                f"--mlbench-save-mode=overwrite to replace it")
        return old or self.get(f"{self._next_num}_{name}.json")

    def save_run(self, output_json: Mapping[str, Any], name: str, overwrite: bool) -> Path:
        path = self.target(name, overwrite)
        atomic_write(path, safe_dumps(output_json, ensure_ascii=True, indent=4).encode())
        self.logger.info(f"Saved benchmark data in: {path}")
        return path

    def save(self, output_json: Mapping[str, Any], save: str) -> None:
        """pytest-benchmark's ``--benchmark-save`` entry point, made atomic and non-clobbering."""
        self.save_run(output_json, save, overwrite=False)

    def resolve(self, ref: str) -> Path:
        """A file path, ``<name>`` (this machine) or ``<machine-id>/<name>``, to one file."""
        path = Path(ref)
        if path.suffix == ".json" or path.is_file():
            if not path.is_file():
                raise BaselineError(f"{path}: no such baseline file")
            return path
        machine, _, name = ref.rpartition("/")
        other = BaselineStorage(self.path, machine, self.logger) if machine else self
        found = other.existing(check_name(name))
        if found is None:
            names = sorted(p.stem.split("_", 1)[-1] for p in other.folder.glob("*.json"))
            raise BaselineError(f"{other.folder}: no baseline named {name!r} "
                                f"(available: {', '.join(names) or 'none'})")
        return found
