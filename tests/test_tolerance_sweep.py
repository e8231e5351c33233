"""tools/tolerance_sweep.py: an implementation's gradients against float64 along its own
training, judged as the suite's checks judge them, against the spec's tolerance and a
candidate. It passes an honest implementation at the spec's tolerance, fails a candidate too
tight for its rounding, and refuses bad arguments in one line."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("tolerance_sweep", ROOT / "tools" / "tolerance_sweep.py")
assert spec is not None and spec.loader is not None
sweep = importlib.util.module_from_spec(spec)
sys.modules["tolerance_sweep"] = sweep
spec.loader.exec_module(sweep)

CNN = str(ROOT / "suites" / "cnn")
SMALL = ["--size", "smoke", "--seeds", "0-1", "--steps", "4", "--every", "2"]

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="the sweep's test trains cnn's torch implementation")


@needs_torch
def test_an_honest_implementation_passes_and_a_too_tight_candidate_fails(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert sweep.main([CNN, "--impl", "torch-eager", *SMALL]) == 0
    out = capsys.readouterr().out
    assert re.search(r"the spec's tolerance \(rtol [\d.e-]+, atol [\d.e-]+\): 6 evaluations, "
                     r"0 over", out), out
    # float32 rounding is ~1e-7 of a gradient: a 1e-9 tolerance cannot hold it
    assert sweep.main([CNN, "--impl", "torch-eager", *SMALL, "--tolerance", "1e-9,1e-9"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"the candidate \(rtol 1e-09, atol 1e-09\): 6 evaluations, 6 over", out)
    assert re.search(r"torch-eager seed [01] step [024]: \w+ at [\d.e+]+ x the tolerance", out)


@pytest.mark.parametrize(("args", "message"), [
    (["--impl", "torch-fast"], r"--impl torch-fast: cnn offers jax-eager, jax-jit, "),
    (["--seeds", "a-b"], r"--seeds 'a-b': give a seed \(7\) or a range \(0-29\)"),
    (["--tolerance", "1e-3"], r"--tolerance '1e-3': give RTOL,ATOL"),
    (["--size", "huge"], r"--size 'huge': choose from smoke, default, paper"),
    (["--every", "0"], r"--every must be 1 or more"),
])
def test_bad_arguments_get_one_line(args: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        sweep.main([CNN, *args])
