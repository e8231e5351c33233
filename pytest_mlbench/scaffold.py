"""``pytest-mlbench init``: the plugin set up in a user's own repository.

It writes four things and overwrites none of them: the ``mlbench_suites`` setting (one line
added to the pytest configuration the project already uses, found as pytest finds it, every
other line kept: configfile.py; a new pytest.ini when nothing configures pytest), the suites
folder's test file (the two tests that ask for the plugin's fixtures), the control benchmark
(test_control.py: a fixed NumPy matmul timed in every session, which ``pytest-mlbench report
--machines`` divides step times by; control.py) and example workloads to copy from: the
least-squares ``example`` written here, or with ``--example NAME`` any workload folder the
package ships (each of this repository's suites/, installed as pytest_mlbench/examples/NAME),
with the folder it reuses (mlp_optim reuses mlp's). Every later workload is a folder beside
them (ADDING_WORKLOADS.md).

Everything is checked before anything is written (the --suites value, every path in the way,
the setting already there with another value, the configuration's edit read back), the new
files are made in a temporary folder beside their place and renamed into it, the configuration
is replaced by a temporary file renamed over it, and what was renamed is taken back if a later
step fails (renamed back into its temporary folder, which carries the plugin's mark and is the
only thing removed: owned.py): init writes everything or nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_mlbench import configfile, owned

TEST_FILE = '''"""Every workload under this folder, in every selected framework (pytest-mlbench)."""


def test_reference(mlbench_workload):
    """Each workload's float64 reference agrees with finite differences of its model."""
    mlbench_workload.verify()


def test_case(mlbench_case, benchmark):
    """Same start, checked result, audited timed rounds, checks after timing."""
    mlbench_case.run(benchmark)
'''

CONTROL_FILE = '''"""The control benchmark (pytest-mlbench): a fixed NumPy matmul timed in every session.
pytest-mlbench report --machines divides step times by it ("control matmuls"), telling a
slower machine from a slower framework. Keep it in a -k selection: -k "control or ..."."""

import pytest

from pytest_mlbench import control_matmul


@pytest.mark.mlbench_main
def test_control_matmul(benchmark):
    control_matmul(benchmark)
'''

EXAMPLE_SPEC = '''"""Least squares by full-batch gradient descent: the example workload pytest-mlbench init
wrote. Copy this folder to add a workload; ADDING_WORKLOADS.md in pytest-mlbench says how."""

from __future__ import annotations

import numpy as np

from pytest_mlbench import Shape, Workload


def make_data(rng, dims):
    x = rng.standard_normal((dims["n"], dims["d"]))
    return {"x": x, "y": x @ rng.standard_normal((dims["d"], 1))}


def make_params(rng, dims):
    return {"w": 0.01 * rng.standard_normal((dims["d"], 1))}


def loss(p, d):
    r = d["x"] @ p["w"] - d["y"]
    return np.mean(r * r)


def grad(p, d):
    r = d["x"] @ p["w"] - d["y"]
    return {"w": 2 / len(r) * (d["x"].T @ r)}


SPEC = Workload(
    name="example",
    summary="least squares by full-batch gradient descent",
    sizes={"smoke": (Shape({"n": 256, "d": 8}),),
           "default": (Shape({"n": 4096, "d": 64}, steps_per_call=10),),
           "paper": (Shape({"n": 100_000, "d": 64}, steps_per_call=100),)},
    learning_rate=1e-2,
    make_data=make_data,
    make_params=make_params,
    loss=loss,
    grad=grad,
    flops_per_step=lambda dims: 4 * dims["n"] * dims["d"],
    implementations={"numpy": ("eager",)},
    default_precisions=("fp64",),
)
'''

EXAMPLE_NUMPY = '''"""The example workload in plain NumPy, with its hand-written gradient."""

import numpy as np


class Trainer:
    def __init__(self, case):
        self.w, self.batch = case.params["w"], case.batch  # the batch: read at every step
        self.lr = case.learning_rate

    def params(self):
        return {"w": self.w}

    def loss_and_grads(self):
        x, y = self.batch()["x"], self.batch()["y"]
        r = x @ self.w - y
        return np.mean(r * r), {"w": 2 / len(r) * (x.T @ r)}

    def step(self):
        loss, g = self.loss_and_grads()
        self.w -= self.lr * g["w"]
        return loss


def build(case):
    return Trainer(case)
'''

SUITES_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")
NAME_MAX = 255  # bytes in one folder name (Linux, macOS, Windows)
PATH_MAX = 1024  # bytes in a whole path (macOS's limit, the smallest)
SETTING = "mlbench_suites"
STAGING = "pytest-mlbench init's staging folder, removed as init ends"
EXAMPLE = "example"  # the least-squares workload written from this module
# a workload folder another one reuses: its implementations or its spec, by folder name
REUSES = re.compile(r"""implementations_from\s*=\s*["'](\w+)["']|parent\s*/\s*["'](\w+)["']""")


class InitError(ValueError):
    """Nothing was written: the reason, in one line."""


@dataclass(frozen=True)
class Plan:
    """What init writes, every check passed."""

    root: Path
    suites: str
    files: dict[Path, str]  # new files (absolute path -> text), none of them there yet
    config: configfile.ConfigFile | None  # the file to edit; None: a new pytest.ini
    config_text: str | None  # its new text; None: the setting is there already
    lines: list[str] = field(default_factory=list)  # what was written or kept, one a line


def examples_root() -> Path | None:
    """The shipped workload folders: pytest_mlbench/examples in an installed package, this
    repository's suites/ in a clone; None when this installation has neither."""
    here = Path(__file__).resolve().parent
    for folder in (here / "examples", here.parent / "suites"):
        if (folder / "mlp" / "spec.py").is_file():
            return folder
    return None


def shipped() -> list[str]:
    root = examples_root()
    return sorted(p.parent.name for p in root.glob("*/spec.py")) if root else []


def reused(name: str) -> list[str]:
    """The shipped folders ``name`` needs beside it, itself first (mlp_optim: mlp_optim, mlp)."""
    root = examples_root()
    assert root is not None
    found = [name]
    for folder in found:
        for match in REUSES.finditer((root / folder / "spec.py").read_text(encoding="utf-8")):
            other = match.group(1) or match.group(2)
            if other not in found and (root / other / "spec.py").is_file():
                found.append(other)
    return found


def check_suites(suites: str) -> None:
    if not SUITES_NAME.fullmatch(suites) or ".." in suites.split("/"):
        raise InitError(f"--suites {suites!r}: give a folder path inside the project, such as "
                        "benchmarks or bench/suites (letters, digits, _ . - and /)")
    longest = max(suites.split("/"), key=len)
    if len(longest.encode()) > NAME_MAX or len(suites.encode()) > PATH_MAX // 2:
        raise InitError(f"--suites {suites[:40]!r}...: a folder name longer than {NAME_MAX} "
                        f"characters or a path longer than {PATH_MAX // 2}; give a shorter "
                        "folder path inside the project, such as benchmarks")


def example_files(names: Sequence[str], folder: Path, label: str,
                  lines: list[str]) -> dict[Path, str]:
    """Each example's files under ``folder`` (``label``, as the user named it), with the
    shipped folders it reuses that are not there already; ``lines`` gets one line a folder."""
    known = shipped()
    unknown = [n for n in names if n != EXAMPLE and n not in known]
    if unknown:
        raise InitError(f"--example {unknown[0]!r}: no such example; this installation ships: "
                        f"{', '.join([EXAMPLE, *known])}")
    files: dict[Path, str] = {}
    for name in names:
        if name == EXAMPLE:
            files[folder / EXAMPLE / "spec.py"] = EXAMPLE_SPEC
            files[folder / EXAMPLE / "impl_numpy.py"] = EXAMPLE_NUMPY
            lines.append(f"wrote {label}/{EXAMPLE} (spec.py, impl_numpy.py)")
            continue
        for i, needed in enumerate(reused(name)):
            why = f"; {name} reuses it" if i else ""
            if i and (folder / needed).exists():
                lines.append(f"kept {label}/{needed} (already there{why})")
                continue  # the project's own copy of a reused folder is used as it is
            sources = sorted((_examples() / needed).glob("*.py"))
            files.update({folder / needed / f.name: f.read_text(encoding="utf-8")
                          for f in sources})
            lines.append(f"wrote {label}/{needed} ({', '.join(f.name for f in sources)}"
                         f"{why})")
    return files


def _examples() -> Path:
    root = examples_root()
    assert root is not None  # a name was found among the shipped ones
    return root


def in_the_way(root: Path, path: Path, what: str) -> str | None:
    """Why ``path`` cannot be made, or None: a file where a folder goes, or anything there."""
    for parent in reversed(path.relative_to(root).parents[:-1]):
        there = root / parent
        if (there.exists() or there.is_symlink()) and not there.is_dir():
            return f"{parent} is a file, not a folder"
    if path.exists() or path.is_symlink():
        kind = "a folder" if path.is_dir() else "a file"
        return f"{path.relative_to(root)} already exists ({kind}, where init would write {what})"
    return None


def plan(root: Path, suites: str, examples: Sequence[str] = (EXAMPLE,)) -> Plan:
    """What init writes into the project at ``root``; InitError, naming the first problem, if
    it would overwrite anything or cannot be done."""
    check_suites(suites)
    if not root.is_dir():
        raise InitError(f"{root}: no such folder; give the root of your project")
    root = root.resolve()
    folder = root / suites
    lines: list[str] = []
    files: dict[Path, str] = {}
    tests = {folder / "test_workloads.py": TEST_FILE, folder / "test_control.py": CONTROL_FILE}
    for path, source in tests.items():
        kept = path.is_file()
        lines.append(f"{'kept' if kept else 'wrote'} {suites}/{path.name}"
                     f"{' (already there)' if kept else ''}")
        if not kept:
            files[path] = source
    files.update(example_files(list(dict.fromkeys(examples)), folder, suites, lines))
    for top in dict.fromkeys(folder / p.relative_to(folder).parts[0] for p in files):
        why = in_the_way(root, top, "a test file" if top in tests else "an example")
        if why:
            raise InitError(f"{why}; nothing was written (remove it, or give another folder "
                            "with --suites)")
    config, text = _setting(root, suites, lines)
    return Plan(root, suites, files, config, text, [lines[-1], *lines[:-1]])


def _setting(root: Path, suites: str, lines: list[str]) -> tuple[configfile.ConfigFile | None,
                                                                 str | None]:
    """The configuration pytest reads for the suites folder and its new text (None: the
    setting is there already), or (None, a new pytest.ini) when nothing configures pytest."""
    try:
        found = configfile.locate(root / suites)
        if found is None:
            why = in_the_way(root, root / "pytest.ini", "its settings")
            if why:
                raise InitError(f"{why}; nothing was written (remove or rename it)")
            lines.append("wrote pytest.ini")
            return None, f"[pytest]\n{SETTING} = {suites}\n"
        value = Path(os.path.relpath(root / suites, found.path.parent)).as_posix()
        if root != found.path.parent and root not in found.path.parents:
            raise InitError(f"{found.path} configures pytest for {root} (pytest reads the first "
                            "configuration above the tests); nothing was written (run init "
                            f"there: pytest-mlbench init {found.path.parent} --suites {value})")
        name = found.path.relative_to(root)
        if SETTING in found.settings:
            _kept(found, name, value, lines)
            return None, None
        if not os.access(found.path, os.W_OK):
            raise InitError(f"{name} is read-only; nothing was written (make it writable, or "
                            f"add '{SETTING} = {value}' under its [{found.section}] yourself)")
        text = found.with_setting(SETTING, value)
    except configfile.ConfigError as exc:
        raise InitError(f"{exc}; nothing was written") from None
    lines.append(f"updated {name} ({SETTING} = {value} under [{found.section}])")
    return found, text


def _kept(found: configfile.ConfigFile, name: Path, value: str, lines: list[str]) -> None:
    there = str(found.settings[SETTING])
    if (found.path.parent / there).resolve() != (found.path.parent / value).resolve():
        raise InitError(f"{name} already sets {SETTING} = {there}; nothing was written (init "
                        f"would set {value}: give --suites {there}, or edit that line first)")
    lines.append(f"kept {name} ({SETTING} = {there}, already there)")


# -- writing: everything or nothing --------------------------------------------------------------

def apply(p: Plan) -> list[str]:
    """Writes the plan and returns its lines; InitError, with nothing left written, when the
    project cannot take it (read-only, a disk full)."""
    done: list[tuple[Path, Path]] = []  # (place, staged copy) renamed in, taken back on failure
    staging: list[Path] = []
    try:
        for top, staged in _stage(p.root, p.files, staging):
            os.rename(staged, top)
            done.append((top, staged))
        _write_config(p)
    except OSError as exc:
        for top, staged in reversed(done):  # back into the marked folder it came from
            with contextlib.suppress(OSError):
                os.rename(top, staged)
        where = f" {exc.filename}" if exc.filename else ""
        raise InitError(f"cannot write{where} ({exc.strerror or exc}); nothing was written "
                        "(is the project read-only?)") from None
    finally:
        for folder in staging:
            owned.discard(folder)
    return p.lines


def _stage(root: Path, files: dict[Path, str], staging: list[Path]) -> list[tuple[Path, Path]]:
    """Every new file written into a temporary folder beside its place (kept in ``staging``):
    (place, staged copy) for each outermost new path, ready to be renamed in."""
    staged: dict[Path, Path] = {}
    for path, text in files.items():
        top = _topmost_new(root, path)
        if top not in staged:
            staging.append(Path(owned.mkdtemp(".pytest-mlbench-init-", STAGING, dir=top.parent)))
            staged[top] = staging[-1] / top.name
        target = staged[top] / path.relative_to(top)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return list(staged.items())


def _topmost_new(root: Path, path: Path) -> Path:
    """The outermost folder of ``path`` (or the file itself) that does not exist yet."""
    top = path
    while top.parent != root and not top.parent.exists():
        top = top.parent
    return top


def _write_config(p: Plan) -> None:
    if p.config_text is None:
        return
    target = p.config.path.resolve() if p.config else p.root / "pytest.ini"
    fd, tmp = tempfile.mkstemp(prefix=".pytest-mlbench-init-", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(p.config_text)
        if target.exists():
            shutil.copymode(target, tmp)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def init(root: Path, suites: str, examples: Sequence[str] = ()) -> list[str]:
    """Set the plugin up in the project at ``root``; the lines say what was written and what to
    run next."""
    names = list(examples) or [EXAMPLE]
    suites = suites.rstrip("/")  # benchmarks/ is benchmarks
    lines = apply(plan(root, suites, names))
    first = names[0]
    return [*lines, "",
            f"check every case:  pytest {suites} --mlbench-size=smoke --benchmark-disable",
            f"time them:         pytest {suites}",
            f"gate a change:     pytest {suites} --mlbench-ab=HEAD~1",
            f"add a workload:    copy {suites}/{first} to {suites}/<name> and edit its spec.py",
            f"more examples:     pytest-mlbench init --suites {suites} --example NAME ("
            f"{', '.join(shipped()) or 'none shipped with this installation'})"]
