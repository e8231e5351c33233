"""The compile cache kept across runs (``--mlbench-compile-cache``): one folder holding each
framework's own persistent cache, shared by every worker of a run and by the runs after it,
so that what one run compiled the next one loads.

    <folder>/inductor/   torch inductor's FX graph, AOT autograd and kernel caches, and its
                         precompiled header (frameworks/torch_.share_precompiled_headers)
    <folder>/numba/      numba's cache (NUMBA_CACHE_DIR, ``cache=True``)
    <folder>/jax/        XLA's persistent compilation cache, JAX's
    <folder>/tensorflow/ TensorFlow's XLA executables (jit_compile; TF_XLA_FLAGS'
                         --tf_xla_persistent_cache_directory)
    <folder>/cold.json   each case's cold compile time, from the run that filled the folder
                         (storing/cold_compiles.py)
    <folder>/set-aside/  what a run found unreadable, moved out of the way

    <folder>/.pytest-mlbench-made   the mark: the plugin made the folder (owned.py)

Its default is ``$XDG_CACHE_HOME/pytest-mlbench/compile`` (``~/.cache/pytest-mlbench/compile``
when XDG_CACHE_HOME is unset); ``cold`` gives a session a fresh folder of its own, removed at
its end; ``pytest-mlbench cache clear`` empties the folder. The folder is the plugin's: made
with its mark, or an empty one (or one holding only the entries above, from a version before
the mark) marked as the session starts; a folder holding anything else is refused before the
session writes into it, and ``cache clear`` refuses a folder without the mark (it removes only
the entries above, and says what else it kept).

A file another run left unreadable (overwritten with garbage, cut short) would fail a case in
the framework's own words (numba: ``UnpicklingError`` from its cache; torch: g++ errors against
a broken kernel), or be read and compiled again in every run (JAX warns, compiles, and never
replaces the entry). So before a run's workers start, each framework's files are read the way
their formats allow without importing the framework (``check``): numba's pickles walked opcode
by opcode, inductor's shared objects by their ELF headers against their length, JAX's entries
by their compression header, TensorFlow's by protobuf's wire format (one cut short failed its
case: ``OutOfRangeError: Read less bytes than requested``). A framework's folder with such a
file is moved aside whole, named in one line, and its cases compile afresh. A file written in
the last ``YOUNG_S`` by a framework that does not write atomically (inductor's shared objects,
JAX's and TensorFlow's entries) is left unjudged: another run sharing the folder may be
writing it.
"""

from __future__ import annotations

import argparse
import io
import os
import pickletools
import shutil
import struct
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from pytest_mlbench import owned

__all__ = ["COLD", "FOLDERS", "CacheError", "check", "default_folder", "merge", "prepare",
           "resolve"]

COLD = "cold"  # --mlbench-compile-cache=cold: a fresh folder for the session, removed at its end
FOLDERS = {"torch": "inductor", "numba": "numba", "jax": "jax", "tensorflow": "tensorflow"}
# whose XLA cache a timed run's processes all load or all skip (cache_plan.py)
XLA = ("jax", "tensorflow")
SET_ASIDE = "set-aside"
YOUNG_S = 600.0  # a file this recent may still be being written by another run: not judged
LEDGER = "cold.json"  # storing/cold_compiles.py, with its lock file beside it
# what a compile cache's folder holds (the frameworks' folders, the ledger and its lock, what
# was set aside, the mark): what ``cache clear`` removes, and all an unmarked folder the
# plugin adopts may hold
ENTRIES = frozenset({*FOLDERS.values(), LEDGER, f".{LEDGER}.lock", SET_ASIDE, owned.MARK})
WHAT = "the compile cache kept across runs (--mlbench-compile-cache; pytest-mlbench cache clear)"


class CacheError(ValueError):
    """The compile cache's folder cannot be used; the message says which and what to do."""


def default_folder(environ: Mapping[str, str] = os.environ) -> str:
    """``$XDG_CACHE_HOME/pytest-mlbench/compile``, else under ``~/.cache``."""
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pytest-mlbench", "compile")


def resolve(setting: str, environ: Mapping[str, str] = os.environ) -> str:
    """The folder a session uses: the option's folder, ``cold``, or the default ("")."""
    return setting or default_folder(environ)


def prepare(folder: str) -> None:
    """Make the folder with its mark, or mark an empty one (or one a version before the mark
    filled); CacheError in one line for a folder that cannot be written or holds anything
    else (the user's files: the plugin neither writes among them nor could clear them)."""
    try:
        try:
            owned.make(folder, WHAT)
        except FileExistsError:
            if not owned.is_marked(folder):
                _adopt(folder)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied", folder)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise CacheError(f"--mlbench-compile-cache: cannot use {folder} as the compile cache "
                         f"({why}); give a folder you can write with "
                         "--mlbench-compile-cache=DIR, or cold for a fresh one each session"
                         ) from None


def _adopt(folder: str) -> None:
    """Mark an existing folder that holds nothing but a compile cache's entries."""
    if not os.path.isdir(folder):
        raise NotADirectoryError(20, "Not a directory", folder)
    others = sorted(set(os.listdir(folder)) - ENTRIES)
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise CacheError(f"--mlbench-compile-cache: {folder} holds files pytest-mlbench did not "
                         f"make ({shown}) and no {owned.MARK} mark; give a new or empty folder "
                         "(the plugin marks it as its own), or cold for a fresh one each session")
    owned.mark(folder, WHAT)


# -- reading what is there without the frameworks -----------------------------------------

def _pickles(data: bytes, size: int = 0) -> str:
    """Why ``data`` is not one or more whole pickles, or ""."""
    if not data:
        return "empty"
    stream = io.BytesIO(data)
    try:
        while stream.tell() < len(data):
            for _ in pickletools.genops(stream):
                pass
    except (ValueError, EOFError, struct.error, UnicodeDecodeError) as exc:
        return f"not a pickle ({exc})"
    return ""


def _elf(data: bytes, size: int = 0) -> str:
    """Why ``data`` (an object's first bytes; ``size``: its length) is no whole ELF object:
    no magic, or section headers past its end (an object cut short: ld writes them last)."""
    size = size or len(data)
    if data[:4] != b"\x7fELF" or len(data) < 64:
        return "not an ELF object"
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    offset, entry, count = (struct.unpack_from(f"{order}Q", data, 0x28)[0],
                           *struct.unpack_from(f"{order}HH", data, 0x3A)) if wide else (
        struct.unpack_from(f"{order}I", data, 0x20)[0],
        *struct.unpack_from(f"{order}HH", data, 0x2E))
    if offset + entry * count > size:
        return f"cut short ({size} bytes, its section headers end at {offset + entry * count})"
    return ""


def _compressed(data: bytes, size: int = 0) -> str:
    """JAX's entries: zstd or zlib, by their headers."""
    if data[:4] == b"\x28\xb5\x2f\xfd":
        return ""
    if len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0:
        return ""
    return "neither zstd nor zlib data"


def _protobuf(data: bytes, size: int = 0) -> str:
    """TensorFlow's entries (a binary XlaSerializedCacheEntry): fields by protobuf's wire
    format, each whole, the last ending where the file does."""
    at, end = 0, len(data)

    def varint() -> int:
        nonlocal at
        value = shift = 0
        while at < end and shift < 70:
            byte = data[at]
            at, value, shift = at + 1, value | (byte & 0x7F) << shift, shift + 7
            if not byte & 0x80:
                return value
        raise ValueError("a varint runs past the end")

    if not data:
        return "empty"
    try:
        while at < end:
            tag = varint()
            kind, field = tag & 7, tag >> 3
            if field == 0 or kind not in (0, 1, 2, 5):
                raise ValueError(f"no field at byte {at}")
            if kind == 0:
                varint()
            elif kind == 2:
                length = varint()
                at += length
            else:
                at += 8 if kind == 1 else 4
            if at > end:
                raise ValueError(f"a field runs past the end ({end} bytes)")
    except ValueError as exc:
        return f"not a whole protobuf ({exc})"
    return ""


# folder -> (does a file of this name get judged, how, the bytes it reads (0: all), written
# atomically)
Judge = tuple[Callable[[str], bool], Callable[[bytes, int], str], int, bool]
JUDGES: dict[str, Judge] = {
    "numba": (lambda name: name.endswith((".nbi", ".nbc")), _pickles, 0, True),
    "inductor": (lambda name: name.endswith(".so"), _elf, 64, False),
    "jax": (lambda name: name.endswith("-cache"), _compressed, 4, False),
    "tensorflow": (lambda name: name.endswith(".pb"), _protobuf, 0, False),
}


def unreadable(folder: Path, sub: str, now: float | None = None) -> tuple[str, str] | None:
    """The first file of ``folder/sub`` that its framework could not read, and why."""
    wanted, judge, head, atomic = JUDGES[sub]
    now = time.time() if now is None else now
    for path in sorted((folder / sub).rglob("*")):
        if not wanted(path.name) or not path.is_file():
            continue
        found = path.stat()
        if not atomic and now - found.st_mtime < YOUNG_S:
            continue
        with open(path, "rb") as handle:
            why = judge(handle.read(head or -1), found.st_size)
        if why:
            return str(path.relative_to(folder / sub)), why
    return None


def check(folder: str) -> list[tuple[str, str]]:
    """Each framework's folder holding a file it could not read, moved to ``set-aside/``:
    (framework, the line that says so)."""
    root, moved = Path(folder), []
    for framework, sub in FOLDERS.items():
        found = unreadable(root, sub) if (root / sub).is_dir() else None
        if found is None:
            continue
        where = set_aside(root / sub)
        moved.append((framework, f"mlbench: the compile cache's {framework} folder "
                                 f"{root / sub} held a file {framework} cannot read "
                                 f"({found[0]}: {found[1]}): set aside as {where}; its "
                                 "cases compile afresh"))
    return moved


def set_aside(path: Path) -> Path:
    """Move ``path`` (a file or folder of the cache) under ``set-aside/``, stamped."""
    stamp = f"{path.name}-{time.strftime('%Y%m%dT%H%M%S')}"
    target, n = path.parent / SET_ASIDE / stamp, 1
    while target.exists():
        target, n = path.parent / SET_ASIDE / f"{stamp}.{n}", n + 1
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, target)
    return target


def merge(source: str, folder: str, frameworks: tuple[str, ...] = XLA) -> int:
    """Copy the entries ``source`` holds and ``folder`` lacks, each framework's folder to its
    own (a temporary name, then renamed: a reader never sees half an entry); how many."""
    copied = 0
    for framework in frameworks:
        sub = FOLDERS[framework]
        for path in sorted(Path(source, sub).rglob("*")):
            target = Path(folder, sub, path.relative_to(Path(source, sub)))
            if not path.is_file() or target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
            shutil.copyfile(path, partial)
            os.replace(partial, target)
            copied += 1
    return copied


# -- pytest-mlbench cache --------------------------------------------------------------------

def add_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``pytest-mlbench cache [clear] [--compile-cache DIR]`` (cli.py)."""
    cmd = sub.add_parser("cache", help="the compile cache kept across runs: where, how large; "
                                       "clear empties it")
    cmd.add_argument("action", nargs="?", choices=("show", "clear"), default="show")
    cmd.add_argument("--compile-cache", default="", metavar="DIR",
                     help="the folder, as --mlbench-compile-cache gives it. Default: "
                          "$XDG_CACHE_HOME/pytest-mlbench/compile (~/.cache/...)")


def command(args: argparse.Namespace) -> int:
    folder = Path(resolve(args.compile_cache))
    if args.action == "clear":
        return clear(folder)
    if not folder.is_dir():
        print(f"pytest-mlbench: compile cache {folder}: empty (no run has filled it)")
        return 0
    for line in describe(folder):
        print(line)
    return 0


def clear(folder: Path) -> int:
    """Remove a marked folder's compile cache entries (the folder too when nothing else is
    left); a folder without the mark is refused in one line, untouched (exit 2)."""
    if not folder.exists() and not folder.is_symlink():
        print(f"pytest-mlbench: compile cache {folder}: nothing there to clear")
        return 0
    if not owned.is_marked(folder):
        print(f"pytest-mlbench cache clear: error: {folder} has no {owned.MARK} file: "
              "pytest-mlbench did not make it as a compile cache, and removes only folders it "
              "made; nothing was removed (give the folder --mlbench-compile-cache used)",
              file=sys.stderr)
        return 2
    kept = sorted(set(os.listdir(folder)) - ENTRIES)
    if kept:  # the folder and its mark stay, with what someone else put there
        _remove_entries(folder)
    else:
        owned.remove(folder)
    print(f"pytest-mlbench: compile cache {folder} cleared: the next run compiles cold"
          + (f"; kept what the plugin did not put there: {', '.join(kept)}" if kept else ""))
    return 0


def _remove_entries(folder: Path) -> None:
    for name in sorted(ENTRIES - {owned.MARK}):
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists() or path.is_symlink():
            path.unlink()


def describe(folder: Path) -> list[str]:
    lines = [f"pytest-mlbench: compile cache {folder}"]
    for framework, sub in FOLDERS.items():
        files = [p for p in (folder / sub).rglob("*") if p.is_file()]
        if files:
            size = sum(p.stat().st_size for p in files) / 1e6
            lines.append(f"  {framework:<10} {sub + '/':<10} {len(files)} file(s), {size:.1f} MB")
    ledger = folder / "cold.json"  # storing/cold_compiles.py
    if ledger.is_file():
        lines.append(f"  cold compile times of its cases in {ledger}")
    aside = folder / SET_ASIDE
    if aside.is_dir():
        lines.append(f"  set aside: {len(list(aside.iterdir()))} folder(s) in {aside}")
    if not owned.is_marked(folder):
        lines.append(f"  no {owned.MARK} mark: pytest-mlbench did not make this folder, and "
                     "cache clear refuses it")
    lines.append("  pytest-mlbench cache clear empties it; --mlbench-compile-cache=cold runs "
                 "one session cold without touching it")
    return lines
