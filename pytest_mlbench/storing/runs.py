"""Saved runs (pytest-benchmark JSON) read and checked once, for every reader.

The gate, ``pytest-mlbench report`` and the plots read a run only through ``load_run`` (a file)
or ``from_json`` (this session's own output), which check what pytest-benchmark's format needs
and every mlbench record (``Record.from_benchmark``). Anything that cannot be trusted, from a
0-byte file left by a killed save to a NaN round or a benchmark listed twice, is one
``BaselineError`` line naming the file, never a traceback or a verdict computed on nonsense.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mlbench.storing.record import Record, RecordError, all_seconds

MAX_DEPTH = 64  # pytest-benchmark JSON nests about 6 deep; far deeper is a broken or hostile file
_SCALARS = frozenset({str, int, float, bool, type(None)})  # what parsed JSON holds but containers


class BaselineError(Exception):
    """A run that cannot be read, found, trusted or written; the message names the file."""


@dataclass(frozen=True)
class Entry:
    """One benchmark of a run: pytest-benchmark's names and, for an mlbench case, its record."""

    fullname: str  # the test's node id, what per-benchmark gate thresholds are keyed on
    name: str  # test_train_step[mlp-jax-jit-cpu-fp32]
    record: Record | None  # None: the control or a plain pytest-benchmark test
    bench: Mapping[str, Any]


@dataclass(frozen=True)
class Run:
    where: str  # the file, or "this session"
    data: Mapping[str, Any]
    entries: tuple[Entry, ...]

    @property
    def machine_info(self) -> Mapping[str, Any]:
        return self.data.get("machine_info") or {}

    @property
    def partial(self) -> bool:
        """Saved from an interrupted or failed session (``--mlbench-save-partial``)."""
        return bool((self.data.get("mlbench") or {}).get("partial", False))

    @property
    def cases(self) -> list[tuple[Entry, Record]]:
        """The mlbench cases, each entry with its record."""
        return [(e, e.record) for e in self.entries if e.record is not None]


def load_run(path: Path | str) -> Run:
    """A saved run from ``path``, checked; BaselineError names the file and the problem."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such baseline file") from None
    except OSError as exc:
        raise BaselineError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not raw.strip():
        raise BaselineError(f"{path}: empty file ({len(raw)} bytes; a save killed before it "
                            "wrote anything?): delete it or save the run again")
    try:
        data = json.loads(raw.decode("utf8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineError(f"{path}: not a complete pytest-benchmark JSON file (truncated or "
                            f"not JSON: {exc})") from None
    except RecursionError:
        raise BaselineError(f"{path}: not a pytest-benchmark run (JSON nested too deeply to "
                            "read)") from None
    return from_json(data, str(path))


def from_json(data: Any, where: str) -> Run:
    """A run from parsed JSON; ``where`` names it in errors (a path, or "this session")."""
    try:
        return Run(where, data, tuple(_entries(data)))
    except (RecordError, TypeError, ValueError, KeyError) as exc:
        # TypeError and the like stand for a check storing/record.py lacks: still one line, no trace
        raise BaselineError(f"{where}: {exc}") from None


def _entries(data: Any) -> Iterator[Entry]:
    _check_top(data)
    seen: set[str] = set()
    for i, bench in enumerate(data["benchmarks"]):
        fullname = _check_bench(bench, i)
        if fullname in seen:
            raise ValueError(f"benchmark {fullname!r} is listed twice")
        seen.add(fullname)
        try:
            record = Record.from_benchmark(bench)
        except RecordError as exc:
            raise RecordError(f"benchmark {fullname!r}: {exc}") from None
        yield Entry(fullname, _text(bench.get("name")) or fullname, record, bench)


def _check_top(data: Any) -> None:
    if not isinstance(data, Mapping):
        raise ValueError("not a pytest-benchmark run (the JSON is not an object)")
    if depth(data) > MAX_DEPTH:
        raise ValueError(f"not a pytest-benchmark run (nested deeper than {MAX_DEPTH} levels)")
    if not isinstance(data.get("benchmarks"), list):
        raise ValueError("not a pytest-benchmark run (no 'benchmarks' list)")
    for key in ("machine_info", "commit_info", "mlbench"):
        if data.get(key) is not None and not isinstance(data[key], Mapping):
            raise ValueError(f"{key!r} is a {type(data[key]).__name__}, not an object")
    mlbench = (data.get("machine_info") or {}).get("mlbench")
    if mlbench is not None and not isinstance(mlbench, Mapping):
        raise ValueError("'machine_info.mlbench' is not an object")
    partial = (data.get("mlbench") or {}).get("partial", False)
    if not isinstance(partial, bool):
        raise ValueError(f"'mlbench.partial' must be true or false (got {partial!r})")


def _check_bench(bench: Any, i: int) -> str:
    """The benchmark's fullname once pytest-benchmark's own fields are sound."""
    if not isinstance(bench, Mapping):
        raise ValueError(f"benchmark #{i} is not an object")
    fullname = bench.get("fullname")
    if not isinstance(fullname, str) or not fullname:
        raise ValueError(f"benchmark #{i} has no 'fullname'")
    if "extra_info" in bench and not isinstance(bench["extra_info"], Mapping):
        raise ValueError(f"benchmark {fullname!r}: 'extra_info' is "
                         f"{json.dumps(bench['extra_info'])[:20]}, not an object")
    stats = bench.get("stats")
    if not isinstance(stats, Mapping):
        raise ValueError(f"benchmark {fullname!r}: 'stats' is missing or not an object")
    rounds = stats.get("data", [])
    if not isinstance(rounds, list) or not (all_seconds(rounds) or all(
            _seconds(t) for t in rounds)):
        raise ValueError(f"benchmark {fullname!r}: 'stats.data' must list finite, "
                         "positive seconds, one per round (a round takes some time)")
    return fullname


def _seconds(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def depth(data: Any) -> int:
    """Nesting depth of parsed JSON, iteratively (a recursive walk is what deep files break)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, Mapping):
            children: Sequence[Any] = list(node.values())
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        # only containers go on the stack: a list of a million rounds is walked once, here,
        # its elements' types read at C speed where it holds no container
        if set(map(type, children)) <= _SCALARS:
            continue
        stack.extend((child, level + 1) for child in children
                     if isinstance(child, dict | list))  # parsed JSON: builtins
    return deepest
