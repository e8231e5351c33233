"""Nothing deleted that the plugin did not make (pytest_mlbench/owned.py): a folder goes only
with the mark the plugin wrote as it made it. Here the rule itself, the compile cache's
``cache clear`` and the folder a session adopts as its compile cache, and init's take-back;
a session's folders, the janitor's and the A/B worktree's in
tests/unit/engine/test_leftovers.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_mlbench import cli, owned
from pytest_mlbench.storing import compile_cache


def user_files(folder: Path) -> dict[str, str]:
    """A folder of someone's own files (a thesis, a subfolder of notes); what it holds."""
    (folder / "notes").mkdir(parents=True, exist_ok=True)
    (folder / "thesis.tex").write_text("\\documentclass{book}")
    (folder / "notes" / "monday.txt").write_text("read the proofs")
    return held(folder)


def held(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*") if p.is_file()}


def test_only_a_marked_folder_is_removed(tmp_path: Path) -> None:
    ours = owned.make(tmp_path / "ours", "a test's")
    (ours / "deep").mkdir()
    owned.remove(ours)
    assert not ours.exists()
    mine = tmp_path / "mine"
    files = user_files(mine)
    with pytest.raises(owned.NotMade, match=rf"{mine} has no {owned.MARK} file: .* nothing was "
                                            "removed"):
        owned.remove(mine)
    assert held(mine) == files
    (mine / owned.MARK).mkdir()  # a folder named like the mark is no mark
    assert not owned.discard(mine) and held(mine) == files
    owned.remove(tmp_path / "never-made")  # not there: nothing to do


def test_cache_clear_refuses_a_folder_of_user_files_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: ``cache clear --compile-cache DIR`` on a folder of a user's own files
    (given by mistake) deleted it and said "cleared"."""
    files = user_files(tmp_path)
    assert cli.main(["cache", "clear", "--compile-cache", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert f"{tmp_path} has no {owned.MARK} file" in err and "nothing was removed" in err
    assert held(tmp_path) == files


def test_cache_clear_keeps_what_the_plugin_did_not_put_in_its_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "compile"
    compile_cache.prepare(str(folder))
    files = user_files(folder)  # and the mark
    (folder / "jax").mkdir()
    (folder / "jax" / "entry-cache").write_bytes(b"x")
    (folder / "cold.json").write_text("{}")
    assert cli.main(["cache", "clear", "--compile-cache", str(folder)]) == 0
    assert "kept what the plugin did not put there: notes, thesis.tex" in capsys.readouterr().out
    assert held(folder) == files and owned.is_marked(folder)
    assert not (folder / "jax").exists() and not (folder / "cold.json").exists()


def test_a_folder_of_user_files_is_never_made_a_compile_cache(tmp_path: Path) -> None:
    """A session writes into its compile cache and ``cache clear`` empties it, so a folder of
    other files is refused before anything is written; an empty folder, or one holding only
    what an unmarked (older) compile cache holds, is marked and used."""
    files = user_files(tmp_path / "thesis")
    with pytest.raises(compile_cache.CacheError, match=r"holds files pytest-mlbench did not "
                                                       r"make \(notes, thesis.tex\) and no "):
        compile_cache.prepare(str(tmp_path / "thesis"))
    assert held(tmp_path / "thesis") == files
    (tmp_path / "empty").mkdir()
    older = tmp_path / "older"
    (older / "numba").mkdir(parents=True)
    (older / "cold.json").write_text("{}")
    for folder in (tmp_path / "empty", older, tmp_path / "new" / "compile"):
        compile_cache.prepare(str(folder))
        assert owned.is_marked(folder)
    assert sorted(os.listdir(older)) == [owned.MARK, "cold.json", "numba"]
