"""``pytest-mlbench init``: the plugin set up in a user's own repository.

It writes three things and overwrites none of them: the ``mlbench_suites`` ini setting (into the
project's existing pytest configuration, or a new pytest.ini), the suites folder's test file (the
two tests that ask for the plugin's fixtures) and one example workload (a least-squares model with
its NumPy implementation) to copy from. Every later workload is a folder beside the example
(ADDING_WORKLOADS.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

TEST_FILE = '''"""Every workload under this folder, in every selected framework (pytest-mlbench)."""


def test_reference(mlbench_workload):
    """Each workload's float64 reference agrees with finite differences of its model."""
    mlbench_workload.verify()


def test_case(mlbench_case, benchmark):
    """Same start, checked result, audited timed rounds, checks after timing."""
    mlbench_case.run(benchmark)
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

# where pytest reads its settings, in its own order, and the section header in each
CONFIGS = (("pytest.ini", r"\[pytest\]"), ("pyproject.toml", r"\[tool\.pytest\.ini_options\]"),
           ("tox.ini", r"\[pytest\]"), ("setup.cfg", r"\[tool:pytest\]"))
SUITES_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")


class InitError(ValueError):
    """Nothing was written: the reason, in one line."""


@dataclass(frozen=True)
class Write:
    path: Path
    text: str
    action: str  # "create" or "update"


def plan(root: Path, suites: str) -> list[Write]:
    """What init writes into the project at ``root``; InitError if it would overwrite
    anything or the project's configuration cannot take the setting."""
    if not SUITES_NAME.fullmatch(suites) or ".." in suites.split("/"):
        raise InitError(f"--suites {suites!r}: give a folder path inside the project, such as "
                        "benchmarks or bench/suites (letters, digits, _ . - and /)")
    if not root.is_dir():
        raise InitError(f"{root}: no such folder; give the root of your project")
    folder = root / suites
    files = [Write(folder / "test_workloads.py", TEST_FILE, "create"),
             Write(folder / "example" / "spec.py", EXAMPLE_SPEC, "create"),
             Write(folder / "example" / "impl_numpy.py", EXAMPLE_NUMPY, "create")]
    there = [str(w.path.relative_to(root)) for w in files if w.path.exists()]
    if there:
        raise InitError(f"{', '.join(there)} already exist(s); nothing was written (remove them, "
                        "or give another folder with --suites)")
    return [_setting(root, suites), *files]


def _setting(root: Path, suites: str) -> Write:
    """The ``mlbench_suites`` line, added under the pytest section of the first configuration
    file pytest would read, or a new pytest.ini when the project has none."""
    for name, header in CONFIGS:
        path = root / name
        if not path.is_file():
            continue
        text = path.read_text()
        section = re.search(rf"^{header}[ \t]*$", text, re.MULTILINE)
        if section is None:
            continue
        if re.search(r"^mlbench_suites\s*=", text, re.MULTILINE):
            raise InitError(f"{name} already sets mlbench_suites; nothing was written (edit it, "
                            "or remove it to let init set it)")
        value = f'"{suites}"' if name == "pyproject.toml" else suites
        at = section.end()
        return Write(path, f"{text[:at]}\nmlbench_suites = {value}{text[at:]}", "update")
    return Write(root / "pytest.ini", f"[pytest]\nmlbench_suites = {suites}\n", "create")


def apply(writes: list[Write], root: Path) -> list[str]:
    lines = []
    for w in writes:
        w.path.parent.mkdir(parents=True, exist_ok=True)
        w.path.write_text(w.text)
        lines.append(f"{'updated' if w.action == 'update' else 'wrote'} "
                     f"{w.path.relative_to(root)}")
    return lines


def init(root: Path, suites: str) -> list[str]:
    """Set the plugin up in the project at ``root``; the lines say what was written and what to
    run next."""
    lines = apply(plan(root, suites), root)
    return [*lines, "",
            f"check every case:  pytest {suites} --mlbench-size=smoke --benchmark-disable",
            f"time them:         pytest {suites}",
            f"gate a change:     pytest {suites} --mlbench-ab=HEAD~1",
            f"add a workload:    copy {suites}/example to {suites}/<name> and edit its spec.py"]
