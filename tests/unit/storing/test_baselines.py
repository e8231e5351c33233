"""Baseline storage: every save whole or absent, numbers unique under concurrency and past
9999, partial runs never replacing anything, and everything knowable refused before a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_mlbench.storing import baselines
from pytest_mlbench.storing.baselines import BaselineError, BaselineStorage
from tests.synthetic import bench, record, run_json


def payload(tag: str) -> bytes:
    return json.dumps(run_json(bench(record()), machine={"tag": tag})).encode()


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_numbers_count_past_9999_and_never_overwrite(tmp_path: Path) -> None:
    store = BaselineStorage(tmp_path, "m")
    store.folder.mkdir()
    (store.folder / "9999_a.json").write_bytes(b"{}")
    (store.folder / "10000_a.json").write_bytes(b"keep")
    path = store.save(payload("new"), "b")
    assert path.name == "10001_b.json"
    assert (store.folder / "10000_a.json").read_bytes() == b"keep"
    assert store.existing("a") == store.folder / "10000_a.json"  # by number, not by text


def test_mode_new_refuses_an_existing_name_and_overwrite_replaces_it_whole(tmp_path: Path) -> None:
    store = BaselineStorage(tmp_path, "m")
    first = store.save(payload("1"), "main")
    with pytest.raises(BaselineError, match=r"0001_main.json: baseline 'main' exists"):
        store.save(payload("2"), "main")
    assert store.save(payload("3"), "main", mode="overwrite") == first
    assert b'"3"' in first.read_bytes() and names(store.folder) == ["0001_main.json"]


def test_partial_runs_take_a_new_number_and_replace_nothing(tmp_path: Path) -> None:
    store = BaselineStorage(tmp_path, "m")
    whole = store.save(payload("whole"), "main")
    part = store.save(payload("part"), "main", mode="overwrite", partial=True)
    assert part.name == "0002_main.partial.json" and b"whole" in whole.read_bytes()
    assert store.existing("main") == whole  # a name alone never means the partial run
    assert store.resolve("main") == whole and store.resolve("main.partial") == part


def test_only_partial_runs_of_a_name_are_refused_unless_named(tmp_path: Path) -> None:
    store = BaselineStorage(tmp_path, "m")
    part = store.save(payload("part"), "pr", partial=True)
    with pytest.raises(BaselineError, match=r"0001_pr.partial.json: only partial runs of 'pr'.*"
                                            r"name it pr.partial or by path"):
        store.resolve("pr")
    assert store.resolve("pr.partial") == part and store.resolve(str(part)) == part
    assert baselines.is_explicit("pr.partial") and baselines.is_explicit(str(part))
    assert not baselines.is_explicit("pr")


def test_names_resolve_per_machine_and_list_what_exists(tmp_path: Path) -> None:
    store = BaselineStorage(tmp_path, "m1")
    path = store.save(payload("x"), "main")
    assert BaselineStorage(tmp_path, "m2").resolve("m1/main") == path
    with pytest.raises(BaselineError, match=r"no baseline named 'pr' \(available: main\)"):
        store.resolve("pr")
    with pytest.raises(BaselineError, match="no such baseline file"):
        store.resolve(str(tmp_path / "gone.json"))


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = BaselineStorage(tmp_path, "m")
    path = store.save(payload("old"), "main")
    before = path.read_bytes()

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        store.save(payload("new"), "main", mode="overwrite")
    assert path.read_bytes() == before and names(store.folder) == ["0001_main.json"]


# -- two real processes saving at once ----------------------------------------------------------

SAVER = """
import json, sys, time
from pathlib import Path
from pytest_mlbench.storing.baselines import BaselineError, BaselineStorage

root, who, rounds, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
store = BaselineStorage(root, "m")
while not go.exists():
    time.sleep(0.001)
for i in range(rounds):
    for name in (f"same{i}", f"{who}{i}"):
        body = json.dumps({"benchmarks": [], "who": who, "name": name}).encode()
        try:
            print(json.dumps(["saved", str(store.save(body, name)), name]), flush=True)
        except BaselineError as exc:
            print(json.dumps(["refused", str(exc), name]), flush=True)
"""


def test_two_processes_saving_at_once_never_share_a_number_or_lose_a_file(
        tmp_path: Path) -> None:
    rounds, go = 40, tmp_path / "go"
    script = tmp_path / "saver.py"
    script.write_text(SAVER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path / "bl"), who,
                               str(rounds), str(go)], stdout=subprocess.PIPE, text=True, env=env)
             for who in ("a", "b")]
    go.touch()  # both are waiting: start together
    outs = {who: [json.loads(line) for line in p.communicate(timeout=120)[0].splitlines()]
            for who, p in zip("ab", procs, strict=True)}
    assert all(p.returncode == 0 for p in procs)
    saved = {path: (who, name) for who, out in outs.items() for kind, path, name in out
             if kind == "saved"}
    folder = tmp_path / "bl" / "m"
    files = sorted(folder.glob("*.json"))
    # every save that reported success is on disk, whole, with its own content
    assert sorted(map(Path, saved)) == files
    for path, (who, name) in saved.items():
        assert json.loads(Path(path).read_text()) == {"benchmarks": [], "who": who, "name": name}
    numbers = [p.name.split("_")[0] for p in files]
    assert len(numbers) == len(set(numbers)) == 3 * rounds
    # each shared name went to exactly one of the two; the other was refused, not renamed
    for i in range(rounds):
        kinds = sorted(k for out in outs.values() for k, _, n in out if n == f"same{i}")
        assert kinds == ["refused", "saved"]
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temp left


# -- before the run -----------------------------------------------------------------------------

def test_preflight_accepts_a_missing_folder_whose_parent_exists(tmp_path: Path) -> None:
    store = BaselineStorage(tmp_path / "baselines", "m")
    store.preflight("main", "new")
    assert not (tmp_path / "baselines").exists()  # checked, not created, before the run
    assert store.save(payload("x"), "main").parent == tmp_path / "baselines" / "m"


@pytest.mark.parametrize(("case", "message"), [
    ("missing-parent", r"nowhere/baselines: baselines folder missing, and so is its parent"),
    ("root-is-file", r"baselines: is a file, not a baselines folder"),
    ("machine-is-file", r"baselines/m: is a file, not a baselines folder"),
    ("bad-name", r"baseline name 'a b': use letters, digits"),
    ("partial-name", r"baseline name 'main.partial': names may not end in '.partial'"),
    ("long-name", r"file name too long for this filesystem \(\d+ bytes .* at most \d+\)"),
    ("exists", r"0001_main.json: baseline 'main' exists; pass --mlbench-save-mode=overwrite"),
])
def test_preflight_refuses_what_would_fail_after_the_run(tmp_path: Path, case: str,
                                                         message: str) -> None:
    root, name = tmp_path / "baselines", "main"
    if case == "missing-parent":
        root = tmp_path / "nowhere" / "baselines"
    elif case == "root-is-file":
        root.write_text("")
    elif case == "machine-is-file":
        root.mkdir()
        (root / "m").write_text("")
    elif case == "exists":
        BaselineStorage(root, "m").save(payload("x"), "main")
    name = {"bad-name": "a b", "partial-name": "main.partial",
            "long-name": "n" * baselines.name_max(tmp_path)}.get(case, name)
    with pytest.raises(BaselineError, match=message):
        BaselineStorage(root, "m").preflight(name, "new")


def test_preflight_refuses_an_unwritable_folder(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def read_only(folder: Path) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(baselines, "_probe", read_only)
    with pytest.raises(BaselineError, match=r": baselines folder not writable \(Permission "
                                            r"denied\)"):
        BaselineStorage(tmp_path, "m").preflight("main", "new")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes to read-only folders; the monkeypatched test covers it")
def test_preflight_refuses_a_read_only_folder(tmp_path: Path) -> None:
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(BaselineError, match="not writable"):
            BaselineStorage(tmp_path, "m").preflight("main", "new")
    finally:
        tmp_path.chmod(0o755)


def test_pytest_benchmark_reads_what_is_saved(tmp_path: Path) -> None:
    path = BaselineStorage(tmp_path, "m").save(payload("x"), "main")
    listing = subprocess.run([sys.executable, "-m", "pytest_benchmark", "--storage",
                              str(tmp_path), "list"], capture_output=True, text=True)
    assert listing.returncode == 0 and str(path) in listing.stdout
    # and the folder lock leaves nothing behind that would be committed by mistake
    assert names(tmp_path / "m") == ["0001_main.json"]

