"""``pytest-mlbench init`` in process: the setting added to whichever configuration pytest reads
(each layout, checked with pytest's own reader), every other line kept; one-line refusals
that leave the project exactly as it was; ``--example`` copies a shipped workload that the
catalogue then reads. tests/sessions/test_scaffold.py runs a project it set up."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from _pytest.config.findpaths import locate_config  # pytest's own choice of configuration

from pytest_mlbench import cli, frameworks, scaffold
from pytest_mlbench.workloads import catalogue

INI = "# the project's own\n[pytest]  # settings for CI\naddopts = -ra\nmarkers =\n    slow: slow\n"
# (file, its text, the text init leaves: one line added, every other byte kept)
LAYOUTS = {
    "pytest.ini": ("pytest.ini", INI, INI.replace("CI\n", "CI\nmlbench_suites = benchmarks\n")),
    ".pytest.ini": (".pytest.ini", INI, INI.replace("CI\n", "CI\nmlbench_suites = benchmarks\n")),
    "crlf": ("pytest.ini", INI.replace("\n", "\r\n"),
             INI.replace("CI\n", "CI\nmlbench_suites = benchmarks\n").replace("\n", "\r\n")),
    "no section": ("pytest.ini", "; nothing yet\n",
                   "; nothing yet\n\n[pytest]\nmlbench_suites = benchmarks\n"),
    "pytest.toml": ("pytest.toml", '[pytest] # ours\naddopts = ["-ra"]\n',
                    '[pytest] # ours\nmlbench_suites = "benchmarks"\naddopts = ["-ra"]\n'),
    "ini_options": ("pyproject.toml",
                    "[project]\nname = 'x'\n\n[tool.pytest.ini_options]  # CI\naddopts = '-ra'\n",
                    "[project]\nname = 'x'\n\n[tool.pytest.ini_options]  # CI\n"
                    "mlbench_suites = \"benchmarks\"\naddopts = '-ra'\n"),
    "tool.pytest": ("pyproject.toml", "[tool.pytest]\naddopts = ['-ra']\n[tool.ruff]\nx = 1\n",
                    "[tool.pytest]\nmlbench_suites = \"benchmarks\"\naddopts = ['-ra']\n"
                    "[tool.ruff]\nx = 1\n"),
    "tox.ini": ("tox.ini", "[tox]\nenv_list = py\n\n[pytest]\n# keep\naddopts = -q\n",
                "[tox]\nenv_list = py\n\n[pytest]\nmlbench_suites = benchmarks\n# keep\n"
                "addopts = -q\n"),
    "setup.cfg": ("setup.cfg", "[metadata]\nname = x\n[tool:pytest]\naddopts = -q\n",
                  "[metadata]\nname = x\n[tool:pytest]\nmlbench_suites = benchmarks\n"
                  "addopts = -q\n"),
}


def tree(root: Path) -> dict[str, str | None]:
    """Every path under ``root``: a file's text, None for a folder."""
    return {str(p.relative_to(root)): p.read_text() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def init(root: Path, *args: str) -> int:
    return cli.main(["init", str(root), *args])


def one_line_refusal(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nothing was written" in err, err
    for word in words:
        assert word in err, err
    return err


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_init_adds_one_line_to_the_configuration_pytest_reads(
        tmp_path: Path, layout: str, capsys: pytest.CaptureFixture[str]) -> None:
    name, before, after = LAYOUTS[layout]
    (tmp_path / name).write_bytes(before.encode())
    read_before = locate_config(tmp_path, [tmp_path / "benchmarks"])[2]
    assert init(tmp_path) == 0
    assert f"updated {name} (mlbench_suites = benchmarks under [" in capsys.readouterr().out
    assert (tmp_path / name).read_bytes() == after.encode()
    _, found, read, _ = locate_config(tmp_path, [tmp_path / "benchmarks"])
    assert found == tmp_path / name and read["mlbench_suites"].value == "benchmarks"
    assert {k: v for k, v in read.items() if k != "mlbench_suites"} == read_before


@pytest.mark.parametrize(("files", "edited"), [
    ({"pytest.ini": "[pytest]\n", "tox.ini": "[pytest]\n", "pyproject.toml": ""}, "pytest.ini"),
    ({"pyproject.toml": "[project]\nname = 'x'\n", "setup.cfg": "[tool:pytest]\n"}, "setup.cfg"),
    ({"pytest.toml": "", "pytest.ini": "[pytest]\n"}, "pytest.toml"),
    ({"tox.ini": "[tox]\n", "setup.cfg": "[metadata]\n"}, "pytest.ini"),  # neither configures
])
def test_init_edits_the_file_pytest_would_read(tmp_path: Path, files: dict[str, str],
                                               edited: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert init(tmp_path) == 0
    assert locate_config(tmp_path, [tmp_path / "benchmarks"])[1] == tmp_path / edited
    for name, text in files.items():
        assert name == edited or (tmp_path / name).read_text() == text


def test_a_setting_already_there_is_kept_or_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nmlbench_suites = bench\n")
    before = tree(tmp_path)
    assert init(tmp_path) == 2
    one_line_refusal(capsys, "pytest.ini already sets mlbench_suites = bench",
                     "give --suites bench")
    assert tree(tmp_path) == before
    assert init(tmp_path, "--suites", "bench") == 0
    assert "kept pytest.ini (mlbench_suites = bench, already there)" in capsys.readouterr().out
    assert (tmp_path / "pytest.ini").read_text() == "[pytest]\nmlbench_suites = bench\n"


@pytest.mark.parametrize(("make", "words"), [
    (lambda r: (r / "pytest.ini").mkdir(), "pytest.ini already exists (a folder"),
    (lambda r: (r / "benchmarks").write_text("x"), "benchmarks is a file, not a folder"),
    (lambda r: (r / "benchmarks" / "example").mkdir(parents=True),
     "benchmarks/example already exists (a folder"),
    (lambda r: (r / "pyproject.toml").write_text("[tool.pytest.ini_options\n"),
     "pytest cannot read it"),
])
def test_something_in_the_way_is_one_line_and_nothing_is_written(
        tmp_path: Path, make: object, words: str, capsys: pytest.CaptureFixture[str]) -> None:
    make(tmp_path)  # type: ignore[operator]
    before = tree(tmp_path)
    assert init(tmp_path) == 2
    one_line_refusal(capsys, words)
    assert tree(tmp_path) == before


def test_a_configuration_above_the_project_is_named_not_shadowed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tox.ini").write_text("[pytest]\naddopts = -q\n")
    project = tmp_path / "sub"
    project.mkdir()
    assert init(project) == 2
    one_line_refusal(capsys, f"{tmp_path / 'tox.ini'} configures pytest for {project}",
                     f"pytest-mlbench init {tmp_path} --suites sub/benchmarks")
    assert list(project.iterdir()) == []


def test_a_long_suites_value_is_one_line(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert init(tmp_path, "--suites", "x" * 300) == 2
    assert "a folder name longer than 255 characters" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_project_is_one_line_and_nothing_is_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # the tests run as root, whom a read-only mode does not stop: the first write fails here
    def refused(*args: object, **kw: object) -> str:
        raise PermissionError(13, "Permission denied", str(tmp_path))

    monkeypatch.setattr(tempfile, "mkdtemp", refused)
    assert init(tmp_path) == 2
    one_line_refusal(capsys, f"cannot write {tmp_path} (Permission denied)")
    assert list(tmp_path.iterdir()) == []


def test_a_failure_at_the_last_write_takes_back_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "tox.ini").write_text("[pytest]\n")
    before = tree(tmp_path)

    def full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device", dst)

    monkeypatch.setattr(os, "replace", full)
    assert init(tmp_path) == 2
    one_line_refusal(capsys, "No space left on device")
    assert tree(tmp_path) == before  # the test file and the example renamed in were taken back


def test_a_take_back_leaves_the_users_files_and_no_staging_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """init's take-back renames what it renamed in back into its marked staging folder and
    removes only that: the user's own files beside (a thesis, a folder of notes) stay whole."""
    (tmp_path / "benchmarks" / "notes").mkdir(parents=True)
    (tmp_path / "benchmarks" / "thesis.tex").write_text("\\documentclass{book}")
    (tmp_path / "benchmarks" / "notes" / "monday.txt").write_text("read the proofs")
    (tmp_path / "tox.ini").write_text("[pytest]\n")
    before = tree(tmp_path)
    renamed: list[str] = []
    real_rename = os.rename

    def rename(src: str, dst: str) -> None:
        renamed.append(str(dst))
        real_rename(src, dst)

    def full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device", dst)

    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(os, "replace", full)
    assert init(tmp_path) == 2
    one_line_refusal(capsys, "No space left on device")
    assert tree(tmp_path) == before
    assert any(name.endswith("test_workloads.py") for name in renamed)  # it was renamed in


def test_init_writes_the_control_benchmark_and_keeps_one_there(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The control matmul is what report --machines divides step times by: a project's runs
    have it once init has run; a test_control.py of the project's own is kept as it is."""
    first = tmp_path / "first"
    first.mkdir()
    assert init(first) == 0
    assert "wrote benchmarks/test_control.py" in capsys.readouterr().out
    written = (first / "benchmarks" / "test_control.py").read_text()
    assert written == scaffold.CONTROL_FILE and "control_matmul(benchmark)" in written
    other = tmp_path / "other"
    (other / "benchmarks").mkdir(parents=True)
    (other / "benchmarks" / "test_control.py").write_text("# theirs\n")
    assert init(other) == 0
    assert "kept benchmarks/test_control.py (already there)" in capsys.readouterr().out
    assert (other / "benchmarks" / "test_control.py").read_text() == "# theirs\n"


def test_example_copies_a_shipped_workload_with_the_one_it_reuses(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert init(tmp_path, "--example", "mlp_optim", "--suites", "bench/suites") == 0
    out = capsys.readouterr().out
    assert "wrote bench/suites/mlp_optim (impl_numpy.py, spec.py)" in out
    assert "; mlp_optim reuses it)" in out and "wrote pytest.ini" in out
    assert (tmp_path / "pytest.ini").read_text() == "[pytest]\nmlbench_suites = bench/suites\n"
    found = catalogue.discover(tmp_path / "bench" / "suites", frameworks.BUILTIN)
    assert not found.problems and {w.name for w in found.workloads} == {"mlp", "mlp_optim"}
    assert init(tmp_path, "--example", "cnn", "--suites", "bench/suites") == 0  # a second one
    assert "kept bench/suites/test_workloads.py (already there)" in capsys.readouterr().out
    assert init(tmp_path, "--example", "nope") == 2
    assert "--example 'nope': no such example; this installation ships: example, cnn" \
        in capsys.readouterr().err


def test_every_shipped_example_is_packaged_and_reads_alone(tmp_path: Path) -> None:
    """pyproject.toml ships each workload folder of suites/ as pytest_mlbench/examples/<name>
    (and not suites/ itself: its test modules are this repository's), and each example copied
    alone into an empty project is read by the catalogue without a problem."""
    import tomllib

    repo = Path(__file__).parents[2]
    setup = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setup["package-dir"]["pytest_mlbench.examples"] == "suites"
    folders = {p.parent.name for p in (repo / "suites").glob("*/spec.py")}
    assert {p.removeprefix("pytest_mlbench.examples.") for p in setup["packages"]
            if p.startswith("pytest_mlbench.examples.")} == folders
    assert "pytest_mlbench.examples" not in setup["packages"]
    names = scaffold.shipped()
    assert {"cnn", "mlp", "mlp_optim", "vit_infer"} <= set(names)
    for name in names:
        project = tmp_path / name
        project.mkdir()
        assert scaffold.init(project, "suites", [name])
        found = catalogue.discover(project / "suites", frameworks.BUILTIN)
        assert not found.problems, (name, [str(p) for p in found.problems])
        assert name in {w.name for w in found.workloads}


def test_the_wheel_lists_every_package_of_the_tree() -> None:
    """pyproject.toml names the packages (so that suites/ can ship as pytest_mlbench/examples/*):
    a new package folder must be named there too, or the wheel would leave it out."""
    import tomllib

    repo = Path(__file__).parents[2]
    listed = {p for p in tomllib.loads((repo / "pyproject.toml").read_text())["tool"][
        "setuptools"]["packages"] if p.split(".")[1:2] not in (["examples"], ["baselines"])}
    tree = {".".join(p.parent.relative_to(repo).parts)
            for p in (repo / "pytest_mlbench").rglob("*.py") if "__pycache__" not in p.parts}
    assert listed == tree
