"""The package as a user gets it: the wheel built from this tree, installed into a fresh
virtual environment with no checkout on its path, then ``pytest-mlbench init`` in a new
project, the check it prints run as printed, a timed run of its example A/B-gated against the
project's previous commit, and that run set beside the committed baseline by ``report
--machines`` with the control matmuls the control benchmark gives.

Offline and quick: the wheel is built without build isolation by this environment's
setuptools (its PEP 517 hook, as pip calls it) from a copy of the files it ships, installed with ``--no-deps``, and the new
environment reads this one's other packages (pytest, NumPy, the frameworks) through a folder
of links to them, each but this package's own installed copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ("pyproject.toml", "README.md", "LICENSE", "pytest_mlbench", "suites", "baselines")
OWN = ("pytest_mlbench", "pytest_mlbench-", "__editable__")  # this package's installed copy


def run(*args: str | Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this tree, built from a copy of what it ships (the tree is never written)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    source.mkdir()
    for name in SHIPPED:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(REPO / name, source / name)
    # the PEP 517 hook that `pip wheel --no-build-isolation` calls, without pip's own second
    # of start-up and checks
    run(sys.executable, "-c", "import sys; from setuptools import build_meta; "
        "build_meta.build_wheel(sys.argv[1])", base / "dist", cwd=source, env=dict(os.environ))
    (found,) = (base / "dist").glob("pytest_mlbench-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel: Path) -> tuple[Path, dict[str, str]]:
    """A fresh environment holding the wheel; this one's other packages linked in."""
    where = wheel.parent.parent
    env_dir, links = where / "venv", where / "site-links"
    run(sys.executable, "-m", "venv", "--without-pip", env_dir, cwd=where, env=dict(os.environ))
    python = env_dir / "bin" / "python"
    links.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(OWN):
            (links / entry.name).symlink_to(entry)
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                  cwd=where, env=dict(os.environ)).stdout.strip()
    Path(purelib, "zz-test-env.pth").write_text(f"{links}\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
        "-q", wheel, cwd=where, env=dict(os.environ))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "TORCHINDUCTOR_CACHE_DIR")}
    env.update(XDG_CACHE_HOME=str(where / "xdg-cache"), PATH=f"{env_dir / 'bin'}:{env['PATH']}")
    return env_dir, env


def test_the_wheel_ships_what_the_docs_send_users_to(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    examples = [n for n in names if n.startswith("pytest_mlbench/examples/")]
    assert "pytest_mlbench/examples/mlp/spec.py" in examples
    assert all(n.count("/") == 3 for n in examples), "a module of suites/ itself is shipped"
    assert any(n.startswith("pytest_mlbench/baselines/amd-epyc-2c/") for n in names)
    assert "pytest_mlbench/control.py" in names


def _git(project: Path, env: dict[str, str], *args: str) -> None:
    run("git", "-c", "user.email=ci@example.org", "-c", "user.name=ci", *args, cwd=project,
        env=env)


def test_init_and_its_printed_check_run_from_the_installed_wheel(
        venv: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """init, its printed check, then a timed run A/B-gated against the project's last commit
    (the gate's one session also gives the run report reads: a second timed session would
    start the same workers again)."""
    env_dir, env = venv
    python = env_dir / "bin" / "python"
    where = run(python, "-c", "import pytest_mlbench, pytest_mlbench.plugin as p; "
                "print(pytest_mlbench.__file__, p.__file__)", cwd=tmp_path, env=env).stdout
    assert str(REPO) not in where and all(f.startswith(str(env_dir)) for f in where.split())
    project = tmp_path / "their-project"
    project.mkdir()
    out = run(env_dir / "bin" / "pytest-mlbench", "init", cwd=project, env=env).stdout
    assert "wrote benchmarks/test_control.py" in out and "wrote pytest.ini" in out
    assert "pytest benchmarks --mlbench-ab=HEAD~1" in out
    assert (project / "pytest.ini").read_text() == "[pytest]\nmlbench_suites = benchmarks\n"
    check = next(line.split(":", 1)[1].split() for line in out.splitlines()
                 if line.startswith("check every case:"))
    assert check[0] == "pytest"
    checked = run(python, "-m", *check, "-p", "no:cacheprovider", cwd=project, env=env).stdout
    assert "3 passed" in checked  # the example's reference and case, the control benchmark

    _git(project, env, "init", "-q")
    _git(project, env, "add", "-A")
    _git(project, env, "commit", "-qm", "benchmarks")
    impl = project / "benchmarks" / "example" / "impl_numpy.py"
    impl.write_text(impl.read_text() + "\n# a change to gate\n")
    _git(project, env, "commit", "-qam", "a change")
    gated = run(python, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider",
                "--mlbench-size=smoke", "--mlbench-processes=2", "--benchmark-max-time=0.02",
                "--mlbench-ab=HEAD~1", "--benchmark-json=run.json", cwd=project, env=env).stdout
    assert "example-numpy-eager-cpu-fp64" in gated  # the timed case, in the A/B table
    assert "mlbench A/B: passed (1 judged" in gated

    report = run(env_dir / "bin" / "pytest-mlbench", "report", "--machines",
                 "amd-epyc-2c/main", "run.json", cwd=project, env=env).stdout
    control = next(line for line in report.splitlines() if "control GFLOP/s" in line)
    assert "no control" not in control, report
    assert "example: step time (ms) | in control matmuls" in report
