"""The folders pytest-mlbench made, and the only ones it removes.

Every folder the plugin makes and later removes carries a mark: a file named ``MARK`` that
the plugin writes into the folder as it makes it (a session's temporary folder and the
folders inside it, the A/B worktree's folder, ``init``'s staging folders, the compile cache
kept across runs). ``remove`` removes a folder only when its mark is there: a folder of the
user's own files, given by mistake (a path typed wrong, a variable left unset, a session
folder's name taken by hand), is refused with one line naming the mark, and left as it was.

Leaf module: the standard library only (engine/leftovers.py's janitor, which runs without the
package, checks the same file by name).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

__all__ = ["MARK", "NotMade", "discard", "is_marked", "make", "mark", "mkdtemp", "remove"]

MARK = ".pytest-mlbench-made"


class NotMade(OSError):
    """A folder the plugin was asked to remove does not carry its mark: nothing was removed."""


def mark(folder: str | os.PathLike[str], what: str) -> None:
    """Write the mark into ``folder`` (which the plugin made, or adopts as its own): ``what``
    says what the folder is, for whoever finds it."""
    text = (f"made by pytest-mlbench: {what}. pytest-mlbench removes a folder only when this "
            "file is in it.\n")
    Path(folder, MARK).write_text(text, encoding="utf-8")


def make(folder: str | os.PathLike[str], what: str) -> Path:
    """Make ``folder`` (its parents as needed; FileExistsError if it is there) with its mark."""
    path = Path(folder)
    path.mkdir(parents=True)
    mark(path, what)
    return path


def mkdtemp(prefix: str, what: str, dir: str | os.PathLike[str] | None = None) -> str:
    """``tempfile.mkdtemp`` with the mark written into the new folder."""
    folder = tempfile.mkdtemp(prefix=prefix, dir=dir)
    mark(folder, what)
    return folder


def is_marked(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` is a folder (not a link to one) holding the mark as a plain file."""
    path = Path(folder)
    return (path.is_dir() and not path.is_symlink()
            and (path / MARK).is_file() and not (path / MARK).is_symlink())


def remove(folder: str | os.PathLike[str], *, missing_ok: bool = True) -> None:
    """Remove ``folder`` and everything in it if it carries the mark; NotMade (nothing
    removed) if it does not. A folder that is not there is fine with ``missing_ok``."""
    path = Path(folder)
    if missing_ok and not path.exists() and not path.is_symlink():
        return
    if not is_marked(path):
        raise NotMade(f"{path} has no {MARK} file: pytest-mlbench did not make it, and removes "
                      "only folders it made; nothing was removed")
    shutil.rmtree(path, ignore_errors=True)


def discard(folder: str | os.PathLike[str]) -> bool:
    """``remove`` for clean-ups, which must not raise: a folder without the mark is left as it
    is and said in one line on stderr; whether the folder is gone."""
    try:
        remove(folder)
    except NotMade as exc:
        print(f"pytest-mlbench: {exc}", file=sys.stderr)
        return False
    return True
