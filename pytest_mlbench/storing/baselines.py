"""Baselines on disk: ``<baselines>/<machine-id>/NNNN_<name>.json``.

The layout and JSON are pytest-benchmark's ``FileStorage`` ones (``pytest-benchmark --storage
baselines compare`` reads them), written with guarantees its own ``save`` lacks:

- a file appears whole or not at all: the run goes to a temp file, is fsynced, then hard-linked
  (``os.link``, which fails if the name exists) to its final name;
- numbers are taken under an exclusive lock on the machine folder (released by the kernel if
  the holder dies), so two sessions saving at once never share a number and a name of mode
  ``new`` is won by exactly one of them;
- ``overwrite`` replaces with ``os.replace`` and only with a complete run; partial runs
  (``NNNN_<name>.partial.json``) always take a new number;
- numbers past 9999 keep counting (``10000_a.json``).

``preflight`` checks everything knowable before a session runs. Reading is storing/runs.py's job.
The baselines this package ships (``shipped_root``: the repository's committed ones, installed
as pytest_mlbench/baselines) answer a ``<machine-id>/<name>`` the baselines folder lacks
(``resolve_anywhere``), so ``pytest-mlbench report --machines amd-epyc-2c/main ...`` works from
an installed package as from a clone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_mlbench.storing.runs import BaselineError

__all__ = ["BaselineError", "BaselineStorage", "Saved", "check_name", "is_explicit",
           "resolve_anywhere", "shipped_root"]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
PARTIAL = ".partial"
FILE = re.compile(r"^(\d{4,})_(.+?)(\.partial)?\.json$")
MODES = ("new", "overwrite")


@dataclass(frozen=True, order=True)
class Saved:
    """One numbered file of a machine folder."""

    number: int
    name: str
    partial: bool
    path: Path


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise BaselineError(f"baseline name {name!r}: use letters, digits, '.', '_' and '-', "
                            "starting with a letter or digit")
    if name.endswith(PARTIAL):
        raise BaselineError(f"baseline name {name!r}: names may not end in '{PARTIAL}' "
                            "(kept for runs saved from interrupted or failed sessions)")
    return name


def shipped_root() -> Path | None:
    """The committed baselines: pytest_mlbench/baselines in an installed package, the
    repository's baselines/ in a clone; None when this installation has neither."""
    here = Path(__file__).resolve().parents[1]
    for folder in (here / "baselines", here.parent / "baselines"):
        if any(folder.glob("*/[0-9]*.json")):
            return folder
    return None


def resolve_anywhere(storage: BaselineStorage, ref: str) -> Path:
    """``storage.resolve(ref)``; for a ``<machine-id>/<name>`` it lacks, the shipped one of
    that name (the folder's own error when neither has it)."""
    try:
        return storage.resolve(ref)
    except BaselineError as missing:
        shipped = shipped_root()
        machine = ref.rpartition("/")[0]
        if not machine or is_explicit(ref) or shipped is None or shipped == storage.root:
            raise
        try:
            return BaselineStorage(shipped, storage.machine_id).resolve(ref)
        except BaselineError:
            raise missing from None


def is_explicit(ref: str) -> bool:
    """A reference that names a partial run on purpose: a file, or ``<name>.partial``."""
    return ref.endswith(".json") or ref.endswith(PARTIAL) or Path(ref).is_file()


class BaselineStorage:
    """The numbered runs of one machine under ``root``."""

    def __init__(self, root: Path | str, machine_id: str) -> None:
        # no mkdir here (FileStorage would create missing parents): a typo'd path is an error
        self.root = Path(root).absolute()
        self.machine_id = machine_id

    @property
    def folder(self) -> Path:
        return self.root / self.machine_id

    def listing(self) -> list[Saved]:
        """Every numbered file, lowest number first (by value: 10000 comes after 9999)."""
        if not self.folder.is_dir():
            return []
        found = (FILE.match(p.name) for p in self.folder.iterdir())
        return sorted(Saved(int(m[1]), m[2], bool(m[3]), self.folder / m[0]) for m in found if m)

    def existing(self, name: str, *, partial: bool = False) -> Path | None:
        """The newest complete (or partial) run of ``name``."""
        same = [s for s in self.listing() if s.name == name and s.partial == partial]
        return same[-1].path if same else None

    def next_path(self, name: str, partial: bool) -> Path:
        used = [s.number for s in self.listing()]
        number = max(used, default=0) + 1
        return self.folder / f"{number:04d}_{name}{PARTIAL if partial else ''}.json"

    # -- before the run -----------------------------------------------------------------------

    def preflight(self, name: str, mode: str) -> None:
        """Refuse now what would make the save fail after the run: BaselineError."""
        check_name(name)
        self._check_folders()
        self._check_length(name)
        if mode == "new" and (old := self.existing(name)) is not None:
            raise BaselineError(f"{old}: baseline {name!r} exists; pass "
                                "--mlbench-save-mode=overwrite to replace it, or another name")

    def _check_folders(self) -> None:
        for folder in (self.root, self.folder):
            if folder.exists() and not folder.is_dir():
                raise BaselineError(f"{folder}: is a file, not a baselines folder")
        if not self.root.exists() and not self.root.parent.is_dir():
            raise BaselineError(f"{self.root}: baselines folder missing, and so is its parent "
                                f"{self.root.parent}; create it or pass --mlbench-baselines")
        nearest = next(f for f in (self.folder, self.root, self.root.parent) if f.is_dir())
        try:
            _probe(nearest)
        except OSError as exc:
            raise BaselineError(f"{nearest}: baselines folder not writable "
                                f"({exc.strerror or exc})") from None

    def _check_length(self, name: str) -> None:
        nearest = next(f for f in (self.folder, self.root, self.root.parent) if f.is_dir())
        limit = name_max(nearest)
        longest = self.next_path(name, partial=True).name
        for part in (self.machine_id, longest):
            if len(os.fsencode(part)) > limit:
                raise BaselineError(f"{self.folder / longest}: file name too long for this "
                                    f"filesystem ({len(os.fsencode(part))} bytes in "
                                    f"{part[:24]!r}..., at most {limit}); use a shorter name")

    # -- publishing ---------------------------------------------------------------------------

    def save(self, payload: bytes, name: str, *, mode: str = "new",
             partial: bool = False) -> Path:
        """Publish ``payload`` whole under ``name``; BaselineError when ``mode`` forbids it."""
        check_name(name)
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {MODES}")
        for folder in (self.root, self.folder):  # never the root's parents: see preflight
            folder.mkdir(exist_ok=True)
        tmp = _write_temp(self.folder, payload)
        try:
            with folder_lock(self.folder):
                path = self._publish(tmp, name, mode, partial)
            _fsync_dir(self.folder)
            return path
        finally:
            tmp.unlink(missing_ok=True)

    def _publish(self, tmp: Path, name: str, mode: str, partial: bool) -> Path:
        old = None if partial else self.existing(name)
        if old is not None and mode == "new":
            raise BaselineError(f"{old}: baseline {name!r} exists (saved while this session "
                                "ran?); not replaced: pass --mlbench-save-mode=overwrite or "
                                "another name")
        if old is not None:
            os.replace(tmp, old)  # a complete run over a complete run, atomically
            return old
        for _ in range(100):  # someone outside the lock (pytest-benchmark's save) took it
            path = self.next_path(name, partial)
            if _link(tmp, path):
                return path
        raise BaselineError(f"{self.folder}: no free number found for {name!r}")

    # -- finding ------------------------------------------------------------------------------

    def resolve(self, ref: str) -> Path:
        """A ``.json`` path, ``<name>`` (this machine), ``<machine-id>/<name>``, each with an
        optional ``.partial``, to one file. A name alone never picks a partial run."""
        path = Path(ref)
        if ref.endswith(".json") or path.is_file():
            if not path.is_file():
                raise BaselineError(f"{path}: no such baseline file")
            return path
        machine, _, name = ref.rpartition("/")
        other = BaselineStorage(self.root, machine) if machine else self
        partial = name.endswith(PARTIAL)
        base = check_name(name.removesuffix(PARTIAL))
        found = other.existing(base, partial=partial)
        if found is None:
            raise BaselineError(other._not_found(name, base, partial))
        return found

    def _not_found(self, name: str, base: str, partial: bool) -> str:
        partials = [s for s in self.listing() if s.name == base and s.partial]
        if partials and not partial:
            return (f"{partials[-1].path}: only partial runs of {base!r} (saved from an "
                    f"interrupted or failed session); name it {base}{PARTIAL} or by path to "
                    "gate against it")
        names = sorted({s.name + (PARTIAL if s.partial else "") for s in self.listing()})
        return (f"{self.folder}: no baseline named {name!r} "
                f"(available: {', '.join(names) or 'none'})")


# -- file system primitives ---------------------------------------------------------------------

def name_max(folder: Path) -> int:
    """Longest file name the filesystem holding ``folder`` takes, in bytes."""
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (AttributeError, OSError, ValueError):  # Windows: no pathconf; NTFS takes 255
        return 255


def _probe(folder: Path) -> None:
    """Create and remove a file in ``folder``: the only writability test that root, ACLs and
    read-only mounts all answer truthfully (os.access says yes to root)."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".mlbench-probe-")
    os.close(fd)
    os.unlink(tmp)


def _write_temp(folder: Path, payload: bytes) -> Path:
    fd, name = tempfile.mkstemp(dir=folder, prefix=".mlbench-save-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(name, 0o644)  # mkstemp makes it private; baselines are shared and committed
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


def _link(tmp: Path, path: Path) -> bool:
    """Give the finished temp file its final name unless that name exists: False then."""
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS):
            raise
    # no hard links here (FAT, some network mounts): under the lock, check then rename
    if path.exists():
        return False
    os.replace(tmp, path)
    return True


def _fsync_dir(folder: Path) -> None:
    """Make the new directory entry durable (POSIX; Windows cannot open a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Exclusive among savers on this machine; the kernel releases it if the holder dies, so a
    killed session never leaves a stale lock behind."""
    if sys.platform == "win32":  # pragma: no cover - no flock; msvcrt locks a byte of a file
        import msvcrt

        fd = os.open(folder / ".mlbench.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
            yield
        finally:
            os.close(fd)
        return
    import fcntl

    fd = os.open(folder, os.O_RDONLY)  # the folder itself: no lock file to commit by mistake
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
