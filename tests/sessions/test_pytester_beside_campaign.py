"""pytester's in-process runs beside the suites' campaign thread (tests/modules_snapshot.py,
installed by tests/conftest.py): restoring ``sys.modules`` after a run must never leave it without a
module another thread may be looking up, nor drop a module that thread imported meanwhile;
it still drops what the run's own files brought in."""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path

import _pytest.pytester
import pytest

from tests.modules_snapshot import PYTESTER_SNAPSHOT as ORIGINAL
from tests.modules_snapshot import ModulesSnapshot


def test_pytester_uses_the_safe_snapshot() -> None:
    assert _pytest.pytester.SysModulesSnapshot is ModulesSnapshot


def _run_in_temp(tmp_path: Path, snapshot_type: type) -> tuple[bool, bool, bool]:
    """A snapshot; a module from the temporary folder, a library module first imported now
    (as the campaign thread may), a saved module replaced; restore. Returns (temporary one
    dropped, library one kept, replaced one put back)."""
    (tmp_path / "mlbench_tmp_probe.py").write_text("VALUE = 1\n")
    sys.path.insert(0, str(tmp_path))
    sys.modules.pop("colorsys", None)
    keep = sys.modules["json"]
    try:
        snapshot = snapshot_type()
        importlib.import_module("mlbench_tmp_probe")
        library = importlib.import_module("colorsys")
        sys.modules["json"] = type(keep)("json")
        snapshot.restore()
        return ("mlbench_tmp_probe" not in sys.modules, sys.modules.get("colorsys") is library,
                sys.modules["json"] is keep)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules["json"] = keep
        sys.modules.pop("mlbench_tmp_probe", None)


def test_restore_drops_the_runs_own_modules_only(tmp_path: Path) -> None:
    assert _run_in_temp(tmp_path, ModulesSnapshot) == (True, True, True)


def test_pytesters_own_restore_drops_what_another_thread_imported(tmp_path: Path) -> None:
    """The check above can fail: pytester's restore drops the library module too."""
    assert ORIGINAL is not ModulesSnapshot and ORIGINAL.__name__ == "SysModulesSnapshot"
    assert _run_in_temp(tmp_path, ORIGINAL) == (True, False, True)


def _restores_seen_empty(snapshot_type: type, restores: int = 3000) -> bool:
    """Whether a thread polling ``sys.modules`` ever found ``numpy`` missing while the main
    thread restored snapshots (switching threads every microsecond)."""
    import numpy  # noqa: F401 - in sys.modules before the snapshot

    seen, stop = threading.Event(), threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if "numpy" not in sys.modules:
                seen.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        for _ in range(restores):
            snapshot_type().restore()
            if seen.is_set():
                break
    finally:
        stop.set()
        watcher.join()
        sys.setswitchinterval(interval)
    return seen.is_set()


def test_restore_never_leaves_sys_modules_without_a_saved_module() -> None:
    # fewer restores than pytester's gets below: ours never removes a saved key at all, and in
    # the test line's process (thousands of modules, other threads) each costs milliseconds
    assert not _restores_seen_empty(ModulesSnapshot, restores=200)


@pytest.mark.parametrize("tries", [3])
def test_pytesters_own_restore_is_seen_empty(tries: int) -> None:
    """The check above can fail: another thread catches pytester's restore between its
    ``clear()`` and its ``update()`` (a race, so a few tries)."""
    assert any(_restores_seen_empty(ORIGINAL) for _ in range(tries))
