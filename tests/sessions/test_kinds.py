"""Every kind of task (training with each optimizer, inference, each transform) through the
builders: honest implementations pass, and a broken one of each kind fails with a message in
that kind's language naming framework, variant and case.

The implementations are the workload folders of tests/kinds/, run through the real plugin and
engine in one --benchmark-disable session (JAX and NumPy workers only: seconds to start)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests import background
from tests.background import Command
from tests.cheat_session import Session, read

KINDS = Path(__file__).resolve().parents[1] / "kinds"
TIMEOUT_S = 600
HONEST = ["momentum", "adam", "infer", "jvp", "vjp", "hvp", "jacfwd", "jacrev"]


@background.session("kinds", fixture="session")
def kinds_command(folder: Path) -> Command:
    suites = folder / "suites"
    shutil.copytree(KINDS, suites, ignore=shutil.ignore_patterns("__pycache__",
                                                                 "session_module.py"))
    shutil.copy(KINDS / "session_module.py", suites / "test_kinds_session.py")
    shutil.copytree(KINDS.parent.parent / "suites", folder / "models",  # what models.py loads
                    ignore=shutil.ignore_patterns("__pycache__", "test_*.py"))
    (folder / "cheats").mkdir()
    shutil.copy(KINDS.parent / "cheats" / "specs.py", folder / "cheats")  # Owed, for models.py
    (folder / "pytest.ini").write_text("[pytest]\nmlbench_suites = suites\n")
    return Command(["suites", "-p", "no:cacheprovider", "-q", "--mlbench-size=smoke",
                    "--benchmark-disable", "--mlbench-workers=1",
                    f"--junitxml={folder / 'report.xml'}", "-o", "junit_family=xunit2"], folder)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    return read(background.result("kinds", tmp_path_factory))


def caught(session: Session, case: str, pattern: str) -> str:
    """Failed, naming framework, variant and case, with ``pattern`` in the message."""
    result = session[case]
    framework, variant = case.split("-")[-4:-2]
    assert result.status == "failed", f"{case}: {result.status} {result.message}"
    assert f"{framework} {variant} ({case})" in result.message, result.message
    assert re.search(pattern, result.message), f"{case}: {result.message}"
    return result.message


# -- the controls ----------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["eager", "jit"])
@pytest.mark.parametrize("task", HONEST)
def test_honest_jax_passes_every_kind(session: Session, task: str, variant: str) -> None:
    result = session[f"honest-{task}-jax-{variant}-cpu-fp32"]
    assert result.status == "passed", result.message


@pytest.mark.parametrize("task", ["momentum", "adam", "infer"])
def test_honest_numpy_passes_training_and_inference(session: Session, task: str) -> None:
    result = session[f"honest-{task}-numpy-eager-cpu-fp32"]
    assert result.status == "passed", result.message


def test_declared_unsupported_transforms_skip_with_the_reason(session: Session) -> None:
    result = session["honest-jvp-numpy-eager-cpu-fp32"]
    assert result.status == "skipped" and "NumPy has no autodiff" in result.message


def test_the_references_of_every_kind_verify(session: Session) -> None:
    for name in ("honest", "badhyper", "nobias", "jactranspose", "hvpwrong"):
        result = session[f"test_reference[{name}]"]
        assert result.status == "passed", result.message


# -- training ----------------------------------------------------------------------------------

def test_a_wrong_optimizer_hyperparameter_fails_at_the_start(session: Session) -> None:
    caught(session, "badhyper-jax-eager-cpu-fp32",
           r"optimizer hyper-parameters differ from the spec: momentum=0.8 \(spec 0.9\)")


def test_a_momentum_buffer_never_updated_fails_the_first_step(session: Session) -> None:
    caught(session, "nomomentum-jax-eager-cpu-fp32",
           r"first momentum step \(lr=0.05, momentum=0.9\), momentum state momentum.w\d: "
           r"differs by [\d.e-]+ in norm")


def test_adam_without_bias_correction_fails_the_first_step(session: Session) -> None:
    caught(session, "nobias-numpy-eager-cpu-fp32",
           r"first adam step \(lr=0.01, b1=0.9, b2=0.999, eps=1e-08\), displacement of w\d: "
           r"differs by [\d.e-]+ in norm")


# -- inference ---------------------------------------------------------------------------------

def test_inference_outputs_off_fail_the_first_probe(session: Session) -> None:
    caught(session, "inferoff-jax-eager-cpu-fp32",
           r"forward pass for the first probe: differs by [\d.e-]+ in norm .* worst element")


def test_inference_answering_from_a_cache_fails_its_audited_round(session: Session) -> None:
    caught(session, "infercache-jax-jit-cpu-fp32",
           r"timed round 1 \(audited\): .* forward pass of call 0 \(probe \d+\): differs by")


# -- transforms --------------------------------------------------------------------------------

def test_a_transposed_jacobian_fails_on_its_layout(session: Session) -> None:
    caught(session, "jactranspose-jax-jit-cpu-fp32",
           r"Jacobian \(reverse mode\) for the first probe: shape \(16, 128, 1\) != expected "
           r"\(16, 1, 128\)")


def test_a_vjp_of_the_wrong_cotangent_fails(session: Session) -> None:
    caught(session, "vjpcotangent-jax-jit-cpu-fp32",
           r"vector-jacobian product for the first probe w\d: differs by")


def test_an_hvp_of_the_wrong_function_fails(session: Session) -> None:
    caught(session, "hvpwrong-jax-jit-cpu-fp32",
           r"Hessian-vector product for the first probe w\d: differs by")


# -- what the builders refuse ------------------------------------------------------------------

def test_a_builder_missing_the_function_a_kind_needs_says_which(session: Session) -> None:
    result = session["noforward-jax-eager-cpu-fp32"]
    assert result.status == "failed", result.message
    assert "functional.jax(...) was given no forward=, which a forward pass task needs " \
           "(case noforward-jax-eager-cpu-fp32)" in result.message


def test_an_undeclared_missing_transform_names_the_unsupported_entry(session: Session) -> None:
    result = session["undeclared-numpy-eager-cpu-fp32"]
    assert result.status == "failed", result.message
    assert "declare ('numpy', 'jvp') in the spec's unsupported" in result.message


# -- implementations that look at the harness (issue 32) ---------------------------------------

OWED = (r"the result of timed call \d+ is a \S+\.Owed, not one of (jax|numpy)'s own concrete "
        r"arrays .*: work owed, not done")


@pytest.mark.parametrize("name", ["inferowed-infer-jax-jit-cpu-fp32",
                                  "inferowed-vjp-jax-jit-cpu-fp32",
                                  "inferowed-infer-numpy-eager-cpu-fp32"])
def test_a_result_whose_conversion_does_the_work_fails_as_work_owed(session: Session,
                                                                     name: str) -> None:
    """Every third call returns an object whose __array__ computes the result: the harness
    refuses it by type inside the clock instead of converting it after."""
    caught(session, name, OWED)


def test_answers_computed_in_build_for_the_probes_fail_their_audited_round(
        session: Session) -> None:
    """build() answered every probe the seed, shape and index would give; the timed calls'
    probes come from a secret sent as each turn starts, so its table misses them all."""
    caught(session, "inferahead-jax-jit-cpu-fp32",
           r"timed round 1 \(audited\): .* forward pass of call \d+ \(probe \d+\): differs by")


def test_inference_reading_the_harness_for_the_kept_call_finds_nothing_and_fails(
        session: Session) -> None:
    """It computes only the call a frame names as kept; nothing in the worker says which
    round or call is audited, so it answers zeros, and the audited call shows it."""
    caught(session, "inferpeek-jax-jit-cpu-fp32",
           r"timed round 1 \(audited\): .* forward pass of call \d+ \(probe \d+\): differs by")
