"""The page folder's cache of run digests: a history built again reads only its new runs.

``report --html DIR`` keeps, in ``DIR/.mlbench-cache.json``, each run's digest
(history.Digest: where it came from, and per case its figure, interval and processes'
medians) under the SHA-256 of the run file's bytes, so a run is read and checked once: a
later build hashes every file (a second for a gigabyte) and reads through storing/runs.py
only those it has not seen, or that changed. Identities are kept once each and their
records' own validation (``Record.from_json``) reads them back. A cache that cannot be read,
or of another format, is ignored and written anew; it holds the runs of the last build only.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_mlbench.reporting.history import (
    Digest,
    History,
    Point,
    RunInfo,
    digests,
    expand,
    history,
    normalise,
)
from pytest_mlbench.storing.record import SCHEMA, Identity, Record, RecordError

NAME = ".mlbench-cache.json"
FORMAT = 1


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def load(folder: Path, reference: str | None) -> dict[str, Digest]:
    """The digests kept in ``folder``, by file hash (their paths as they were when kept;
    ``restore`` gives them the current ones); {} when there is no usable cache."""
    try:
        data = json.loads((folder / NAME).read_text())
        if data.get("format") != FORMAT or data.get("schema") != SCHEMA:
            return {}
        idents = [_identity(raw) for raw in data["identities"]]
        return {sha: _digest(entry, idents, reference) for sha, entry in data["runs"].items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError, RecordError):
        return {}  # missing, cut short, edited or older: read the runs again


def save(folder: Path, kept: dict[str, Digest]) -> None:
    """``kept`` (the runs of this build) as the folder's cache, replaced whole."""
    index: dict[tuple[Any, ...], int] = {}
    idents: list[dict[str, Any]] = []
    runs: dict[str, dict[str, Any]] = {}
    for sha, d in kept.items():
        points = []
        for p in d.points:
            key = (*p.ident.key, p.ident.kind, p.ident.head)  # all to_json says
            if key not in index:
                index[key] = len(idents)
                idents.append(p.ident.to_json())
            points.append([index[key], p.name, p.figure, p.low, p.high, [*p.processes]])
        runs[sha] = {"info": {**d.info.__dict__}, "points": points}
    payload = json.dumps({"format": FORMAT, "schema": SCHEMA, "identities": idents,
                          "runs": runs}, separators=(",", ":"))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".mlbench-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(payload)
        os.chmod(tmp, 0o644)  # beside the page, which is served and committed
        os.replace(tmp, folder / NAME)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _at(d: Digest, path: Path) -> Digest:
    """A kept digest with the run's current path (the same bytes may have moved)."""
    return Digest(RunInfo(**{**d.info.__dict__, "path": str(path)}), d.points)


def _identity(raw: Any) -> Identity:
    record = Record.from_json({"schema": SCHEMA, "name": "", "identity": raw, "measure": None})
    return record.identity


def _digest(entry: dict[str, Any], idents: list[Identity], reference: str | None) -> Digest:
    info = RunInfo(**entry["info"])
    points = [Point(idents[i], str(name), float(fig), float(low), float(high), 0.0,
                    tuple(float(x) for x in procs))
              for i, name, fig, low, high, procs in entry["points"]]
    return Digest(info, normalise(points, reference))


def read(refs: Sequence[str], resolve: Callable[[str], Path], reference: str | None = None,
         folder: Path | None = None, workers: int | None = None) -> History:
    """history.read, with ``folder``'s cache when one is given: only runs it lacks are read,
    and it is left holding this build's runs."""
    paths = expand(refs, resolve)
    if folder is None:
        return history(digests(paths, reference, workers))
    hashed = [(sha256(path), path) for path in paths]
    kept = load(folder, reference)
    missing = [(sha, path) for sha, path in hashed if sha not in kept]
    fresh = dict(zip([sha for sha, _ in missing],
                     digests([path for _, path in missing], reference, workers), strict=True))
    found = [_at(kept[sha], path) if sha in kept else fresh[sha] for sha, path in hashed]
    if fresh or set(kept) != {sha for sha, _ in hashed}:  # unchanged: nothing to write
        save(folder, {sha: d for (sha, _), d in zip(hashed, found, strict=True)})
    return history(found)
