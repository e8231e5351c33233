"""tools/tolerance_sweep.py: an implementation's gradients, or its trajectory, against float64
along its own training, judged as the suite's checks and audits judge them, against the
spec's tolerance and a candidate. It passes an honest implementation at the spec's
tolerance, fails a candidate too tight for its rounding and an implementation that does other
work (label smoothing, parameters reported a step behind), and refuses bad arguments in one
line."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from tests import cheat_session

ROOT = Path(__file__).resolve().parents[3]
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
    """One sweep judges the same errors against both (the candidate decides the exit status;
    without one the spec's does: the trajectory test below)."""
    # float32 rounding is ~1e-7 of a gradient: a 1e-9 tolerance cannot hold it
    assert sweep.main([CNN, "--impl", "torch-eager", *SMALL, "--tolerance", "1e-9,1e-9"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"the spec's tolerance \(rtol [\d.e-]+, atol [\d.e-]+\): 6 evaluations, "
                     r"0 over", out), out
    assert re.search(r"the candidate \(rtol 1e-09, atol 1e-09\): 6 evaluations, 6 over", out)
    assert re.search(r"torch-eager seed [01] step [024]: \w+ at [\d.e+]+ x the tolerance", out)


@needs_torch
def test_the_trajectory_of_an_honest_cnn_passes_and_label_smoothing_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Judged as an audited round is: from the seeded start and over a round's steps."""
    assert sweep.main([CNN, "--impl", "torch-eager", *SMALL, "--check", "trajectory"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"cnn smoke fp32, trajectory: tolerance rtol 0.005, atol 0.0001", out)
    assert re.search(r"the spec's tolerance .*: 6 evaluations, 0 over", out), out
    folder = cheat_session.make_folder(tmp_path)
    assert sweep.main([str(folder / "suites" / "smoothing"), *SMALL, "--check",
                       "trajectory"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"6 evaluations, 6 over", out), out
    assert re.search(r"torch-eager seed [01] step [024]: round: (state momentum\.)?\w+ at "
                     r"[\d.]+ x the tolerance", out), out


def test_parameters_a_step_behind_fail_the_count_from_the_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tests/cheats/lag reports the parameters before its latest step once its checked steps
    are over: each round looks right from where it started, the count from the seed does
    not, and the audit's nearest-step fallback does not accept it either."""
    folder = cheat_session.make_folder(tmp_path)
    assert sweep.main([str(folder / "suites" / "lag"), "--size", "smoke", "--seeds", "0",
                       "--steps", "12", "--every", "4", "--check", "trajectory"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"jax-jit seed 0 step (4|8|12): start: w at [\d.]+ x the tolerance", out)


@pytest.mark.parametrize(("args", "message"), [
    (["--impl", "torch-fast"], r"--impl torch-fast: cnn offers jax-eager, jax-jit, "),
    (["--seeds", "a-b"], r"--seeds 'a-b': give a seed \(7\) or a range \(0-29\)"),
    (["--tolerance", "1e-3"], r"--tolerance '1e-3': give RTOL,ATOL"),
    (["--size", "huge"], r"--size 'huge': choose from smoke, default, paper"),
    (["--every", "0"], r"--every must be 1 or more"),
    (["--task", "adam"], r"--task 'adam': cnn's training tasks are momentum"),
])
def test_bad_arguments_get_one_line(args: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        sweep.main([CNN, *args])
