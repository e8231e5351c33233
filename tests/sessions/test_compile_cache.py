"""The compile cache kept across runs (storing/compile_cache.py, measuring/cache_plan.py): a
second session loads what the first compiled, says so in its compile column, and still reports
the cold figure the first measured. Two timed sessions of one toy numba case (a least-squares
step written without closures, so that numba caches every function it compiles), one after the
other in a background script, sharing one folder (about 6 s each on 2 cores). A cache
overwritten with garbage is read without the frameworks, here and in
tests/unit/measuring/test_cache_plan.py."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_mlbench.storing import compile_cache
from tests import background
from tests.background import Command
from tests.synthetic import toy_spec

SPEC = toy_spec('{s: (Shape({"n": 64}, rounds=4),) for s in ("smoke", "default", "paper")}',
                '{"numba": ("jit",)}', ' default_precisions=("fp64",),')

IMPL = """
import numpy as np

def gradient(x, y, w):
    r = x @ w - y
    return 0.5 * np.mean(r * r), x.T @ r / r.shape[0]

def sgd(x, y, w, lr):
    r = x @ w - y
    w -= lr * (x.T @ r / r.shape[0])
    return 0.5 * np.mean(r * r)

class Trainer:
    def __init__(self, case):
        self.w, self.batch, self.lr = case.params["w"], case.batch, case.learning_rate
        self.gradient, self.sgd = case.compile(gradient), case.compile(sgd)

    def params(self):
        return {"w": self.w}

    def loss_and_grads(self):
        d = self.batch()
        loss, g = self.gradient(d["x"], d["y"], self.w)
        return loss, {"w": g}

    def step(self):
        d = self.batch()
        return self.sgd(d["x"], d["y"], self.w, self.lr)

def build(case):
    return Trainer(case)
"""

# two sessions, one folder: cold, then from the cache
DRIVER = """
import pathlib, subprocess, sys
here = pathlib.Path(__file__).parent
cache = here / "cache"
for n in (1, 2):
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider",
         "--mlbench-size=smoke", "--mlbench-processes=1", "--benchmark-max-time=0.01",
         f"--mlbench-compile-cache={cache}", f"--benchmark-json={here}/run{n}.json",
         f"--basetemp={here}/tmp{n}"], cwd=here, capture_output=True, text=True)
    print(f"=== session {n}: exit {done.returncode}")
    print(done.stdout + done.stderr)
"""

FILES = {"suites/test_toy.py": "def test_case(mlbench_case, benchmark):\n"
                               "    mlbench_case.run(benchmark)\n",
         "suites/toy/spec.py": SPEC, "suites/toy/impl_numba.py": IMPL, "driver.py": DRIVER}


@background.session("compile_reuse", fixture="reuse")
def reuse_command(folder: Path) -> Command:
    for name, text in FILES.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return Command([], folder, timed=True, program=(sys.executable, str(folder / "driver.py")))


@pytest.fixture(scope="module")
def reuse(tmp_path_factory: pytest.TempPathFactory) -> background.Done:
    return background.result("compile_reuse", tmp_path_factory)


def sessions(done: background.Done) -> dict[int, str]:
    parts = re.split(r"^=== session (\d): exit \d+$", done.output, flags=re.MULTILINE)
    return {int(n): text for n, text in zip(parts[1::2], parts[2::2], strict=True)}


def measure(done: background.Done, n: int) -> dict[str, object]:
    run = json.loads((done.folder / f"run{n}.json").read_text())
    (bench,) = [b for b in run["benchmarks"] if "mlbench" in b["extra_info"]]
    return dict(bench["extra_info"]["mlbench"]["measure"])


def test_a_second_session_loads_what_the_first_compiled(reuse: background.Done) -> None:
    """Session 1 compiles cold and keeps the figure; session 2's workers find both numba
    functions in the cache (numba's own hit counts: every compilation loaded, none made),
    report the load as cached, and the first session's figure beside it as the cold one."""
    out = sessions(reuse)
    assert "1 passed" in out[1] and "1 passed" in out[2], reuse.output
    assert re.search(r"compile cache .*: 0 of 1 case\(s\) compiled there before", out[1])
    assert re.search(r"compile cache .*: 1 of 1 case\(s\) compiled there before", out[2])
    cold, warm = measure(reuse, 1), measure(reuse, 2)
    assert cold["compiled_from"] == "cold" and cold["cold_compile_s"] is None
    assert warm["compiled_from"] == "cache"
    assert warm["cold_compile_s"] == round(float(cold["compile_s"]), 4)  # type: ignore[arg-type]
    assert re.search(rf"numba-jit .* {warm['compile_s']:.3f} cached, cold "
                     rf"{warm['cold_compile_s']:.3f} ", out[2]), out[2]


def test_unreadable_files_are_told_apart_from_whole_ones(tmp_path: Path) -> None:
    """The judges of each framework's files, on whole and broken ones (no framework needed)."""
    import pickle
    import zlib

    whole = pickle.dumps("0.68.1") + pickle.dumps(({"stamp": 1}, {}))
    assert compile_cache._pickles(whole) == ""
    assert compile_cache._pickles(whole[:-3]).startswith("not a pickle")
    assert compile_cache._pickles(b"") == "empty"
    assert compile_cache._compressed(zlib.compress(b"executable")) == ""
    assert compile_cache._compressed(b"garbage") == "neither zstd nor zlib data"
    elf = Path(sys.executable).resolve().read_bytes()
    assert compile_cache._elf(elf) == ""
    assert compile_cache._elf(elf[: len(elf) // 2]).startswith("cut short")
    assert compile_cache._elf(b"garbage" * 20) == "not an ELF object"
    numba = tmp_path / "numba" / "impl"
    numba.mkdir(parents=True)
    (numba / "f.nbi").write_bytes(whole)
    assert compile_cache.check(str(tmp_path)) == []
    (numba / "f.1.nbc").write_bytes(b"\xffgarbage")
    ((framework, line),) = compile_cache.check(str(tmp_path))
    assert framework == "numba" and "f.1.nbc: not a pickle" in line
    assert not (tmp_path / "numba").exists()
    assert [p.name[:6] for p in (tmp_path / "set-aside").iterdir()] == ["numba-"]
