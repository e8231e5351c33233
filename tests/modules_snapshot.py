"""pytester's snapshot of ``sys.modules``, made safe beside the suites' campaign thread."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import _pytest.pytester


class ModulesSnapshot:
    """pytester's snapshot of ``sys.modules``, restored without ever emptying it.

    pytester restores by ``sys.modules.clear()`` then ``update(saved)``. The suites' check-only
    campaign runs on a thread of this process beside these tests, and every reply it unpickles
    looks its classes up in ``sys.modules``: caught between the two calls, it re-imported
    NumPy into an empty ``sys.modules``, whose fresh ``sys`` has no ``warnoptions`` (a CI run
    failed gpt-tensorflow-jit that way). A module the campaign imported during a pytester test
    was dropped as well, to be imported a second time later. So this restore only drops what
    the test's own files brought in (modules from the temporary folders) and puts back what
    the run replaced, one key at a time. (Not "under /tmp": a fresh clone, its tox
    environment and the package with it may well lie there.)"""

    def __init__(self, preserve: Callable[[str], bool] | None = None) -> None:
        self._preserve = preserve
        self._saved = dict(sys.modules)

    def restore(self) -> None:
        for name, module in list(sys.modules.items()):
            if name not in self._saved and _from_temporary_folder(module) \
                    and not (self._preserve and self._preserve(name)):
                sys.modules.pop(name, None)
        for name, module in self._saved.items():
            if sys.modules.get(name) is not module:
                sys.modules[name] = module


TEMPORARY: list[Path] = []  # the test session's basetemp (tests/conftest.py), where pytester works


def _from_temporary_folder(module: ModuleType | None) -> bool:
    where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", ())), None)
    if where is None:
        return False
    parents = Path(where).resolve().parents
    return any(root in parents for root in TEMPORARY)


PYTESTER_SNAPSHOT = _pytest.pytester.SysModulesSnapshot
if PYTESTER_SNAPSHOT.__module__ != "_pytest.pytester":  # this file imported a second time
    PYTESTER_SNAPSHOT = getattr(PYTESTER_SNAPSHOT, "replaced", PYTESTER_SNAPSHOT)


def install() -> None:
    """pytester's runs (its fixture and ``inline_run``) take this snapshot from now on."""
    ModulesSnapshot.replaced = PYTESTER_SNAPSHOT  # type: ignore[attr-defined]
    _pytest.pytester.SysModulesSnapshot = ModulesSnapshot  # type: ignore[misc]
