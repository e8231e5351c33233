"""The correctness checks fail on broken implementations, with a message that names framework,
variant, case, what differed, by how much and against which tolerance.

The broken implementations are workload folders in tests/cheats/ (``bug*``), run through the
real plugin and engine in the shared --benchmark-disable session (conftest.py ``checked``); the
assert_* functions are also shown failing on broken numbers directly."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from pytest_mlbench.checking.asserts import (
    TOLERANCES,
    assert_census,
    assert_close,
    assert_eager,
    assert_grad_matches_finite_differences,
    assert_identical,
    assert_no_retrace,
    assert_plausible,
    assert_trajectory_close,
    assert_variant_applied,
    excess,
)
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads import catalogue, data
from tests.cheat_session import Session

SUITES = Path(__file__).resolve().parents[2] / "suites"
MLP = catalogue.load_workload(SUITES / "mlp")
SMOKE = MLP.sizes["smoke"][0]


def failed(session: Session, case: str, pattern: str) -> str:
    result = session[case]
    framework, variant = case.split("-")[1:3]
    assert result.status == "failed", f"{case}: {result.status} {result.message}"
    assert f"{framework} {variant} ({case})" in result.message, result.message
    assert re.search(pattern, result.message), f"{case}: {result.message}"
    return result.message


# -- broken implementations, through the engine --------------------------------------------------

@pytest.mark.parametrize("name", ["bugsign", "bugbatch", "bugtranspose", "bugtanh"])
def test_a_broken_gradient_fails_naming_the_tensor_worst_element_and_tolerance(
        checked: Session, name: str) -> None:
    failed(checked, f"{name}-numpy-eager-cpu-fp32",
           r"gradient of w\d: differs by [\d.e-]+ in norm .* allowed [\d.e-]+ \(rtol 0.0001, "
           r"atol 1e-05\); worst element at \[\d+, \d+\]: actual")


def test_a_wrong_learning_rate_fails_the_first_step(checked: Session) -> None:
    failed(checked, "buglr-numpy-eager-cpu-fp32",
           r"first sgd step \(lr=0.01\), displacement of w\d: differs by")


def test_parameters_widening_to_float64_fail(checked: Session) -> None:
    failed(checked, "bugf64-numpy-eager-cpu-fp32",
           r"params after the first step: dtype is not the policy's float32: "
           r"\{'w1': 'float64', 'w2': 'float64'\}")


def test_other_start_bytes_fail(checked: Session) -> None:
    failed(checked, "bugstart-numpy-eager-cpu-fp32",
           r"initial params \(the seeded start.*\) w1: not the same bytes: \d+ of 16384 elements "
           r"differ")


def test_a_parameter_the_spec_does_not_declare_fails(checked: Session) -> None:
    failed(checked, "bugbias-numpy-eager-cpu-fp32",
           r"names differ from the spec: extra \['b1'\], missing \[\]")


def test_a_diverging_trajectory_names_the_step(checked: Session) -> None:
    failed(checked, "bugnan-numpy-eager-cpu-fp32", r"trajectory: loss diverged to nan at step 1")


def test_a_wrong_reference_fails_against_finite_differences(checked: Session) -> None:
    reference = checked["test_reference[bugref]"]
    assert reference.status == "failed" and "central differences" in reference.message, \
        reference.message
    assert checked["bugref-numpy-eager-cpu-fp32"].status == "failed"


def test_a_variant_that_never_compiled_fails(checked: Session) -> None:
    failed(checked, "bugneverjit-jax-jit-cpu-fp32",
           r"variant 'jit' was never applied: the implementation did not pass its step through "
           r"case.compile\(\)")


@pytest.mark.parametrize(("framework", "variant"), [
    ("jax", "jit"), ("tensorflow", "jit"), ("torch", "jit"), ("jax", "eager")])
def test_a_step_that_compiles_again_while_timed_fails(checked: Session, framework: str,
                                                      variant: str) -> None:
    """jax.jit and tf.function trace again on the new shape (counted while timed);
    torch.compile runs under fail_on_recompile while timed, so the recompile raises; eager
    JAX compiles its primitives for the new shape, which no jit of the implementation's
    counts but the backend's compilations do."""
    name = f"bugretrace-{framework}-{variant}-cpu-fp32"
    result = checked[name]
    assert result.status in ("failed", "error"), result
    assert re.search(r"compiled during timing|[Rr]ecompil", result.message), result.message
    assert name in result.message


def test_summed_data_parallel_gradients_fail_the_gradient_check(checked: Session) -> None:
    """Two workers whose gradients add up step twice as far as one device."""
    failed(checked, "dpsum-torch-eager-dp-w2-cpu-fp32",
           r"gradient of w1: differs by [\d.e-]+ in norm \(1 of")
    assert checked["dpsum-torch-eager-cpu-fp32"].status == "passed"  # one device: a plain mean
    # TensorFlow's MirroredStrategy with the replicas' losses undivided: Keras sums them
    failed(checked, "dpsum-tensorflow-jit-dp-w2-cpu-fp32",
           r"loss at the start: differs by 0\.693 in norm \(1 of")
    assert checked["dpsum-tensorflow-jit-cpu-fp32"].status == "passed"


# -- the checks on broken numbers ------------------------------------------------------------------

def test_close_reports_the_worst_element_and_the_tolerance() -> None:
    expected = np.arange(6.0).reshape(2, 3)
    actual = expected.copy()
    actual[1, 2] += 1.0
    with pytest.raises(AssertionError, match=r"w: differs by 1 in norm .* allowed .* \(rtol 1e-06,"
                                             r" atol 0\); worst element at \[1, 2\]: actual 6, "
                                             r"expected 5"):
        assert_close(actual, expected, rtol=1e-6, atol=0, where="w")
    with pytest.raises(AssertionError, match=r"non-finite value inf at \[0\]"):
        assert_close(np.array([np.inf]), np.array([1.0]), rtol=1, atol=1)
    with pytest.raises(AssertionError, match=r"shape \(2,\) != expected \(3,\)"):
        assert_close(np.zeros(2), np.zeros(3), rtol=1, atol=1)
    assert_close(expected, expected, rtol=0, atol=0)


def test_excess_is_the_share_of_the_tolerance_assert_close_judges_by() -> None:
    """1.0 at the limit: assert_close passes there and fails just past it."""
    expected = np.array([3.0, 4.0])  # norm 5
    at_limit = expected + np.array([0.0, 0.5 + 0.01 * 7 + 0.25])  # rtol 0.1 x 5 + atol x 7
    assert excess(at_limit, expected, rtol=0.1, atol=0.01, scale=7.0, rounding=0.25) == \
        pytest.approx(1.0)
    assert_close(at_limit - [0, 1e-9], expected, rtol=0.1, atol=0.01, scale=7.0, rounding=0.25)
    with pytest.raises(AssertionError, match="differs by"):
        assert_close(at_limit + [0, 1e-9], expected, rtol=0.1, atol=0.01, scale=7.0,
                     rounding=0.25)
    assert excess(expected * 1.01, expected, rtol=0.02, atol=0) == pytest.approx(0.5)
    assert excess([np.nan, 4.0], expected, rtol=1, atol=1) == float("inf")
    assert excess(expected, expected, rtol=0, atol=0) == 0.0


def test_identical_says_how_many_elements_differ() -> None:
    a = {"w": np.zeros(4, np.float32)}
    assert_identical(a, {"w": np.zeros(4, np.float32)})
    with pytest.raises(AssertionError, match=r"x w: not the same bytes: 1 of 4 elements differ, "
                                             r"the largest by 0.5"):
        assert_identical({"w": np.array([0, 0, 0.5, 0], np.float32)}, a, where="x")
    with pytest.raises(AssertionError, match=r"w: float64\[4\] where float32\[4\] was expected"):
        assert_identical({"w": np.zeros(4)}, a)


def test_trajectory_names_the_step_of_a_nan_or_a_departure() -> None:
    with pytest.raises(AssertionError, match="loss diverged to nan at step 2"):
        assert_trajectory_close([0.7, 0.69, float("nan")], [0.7, 0.69, 0.68], rtol=1e-3, atol=0)
    with pytest.raises(AssertionError, match="departs from the reference at step 1"):
        assert_trajectory_close([0.7, 0.8], [0.7, 0.69], rtol=1e-3, atol=0)


def test_finite_differences_catch_a_wrong_reference() -> None:
    inputs, params = data.seeded_start(MLP, SMOKE, 0, POLICIES["fp64"])
    good = MLP.grad(params, inputs)
    loss = lambda p: float(MLP.loss(p, inputs))  # noqa: E731
    rng = data.generator(0, "fd")
    assert_grad_matches_finite_differences(loss, good, params, rtol=1e-6, atol=1e-9, rng=rng)
    bad = {"w1": good["w1"], "w2": 2 * good["w2"]}
    with pytest.raises(AssertionError, match="central differences"):
        assert_grad_matches_finite_differences(loss, bad, params, rtol=1e-6, atol=1e-9, rng=rng)


def test_variant_never_applied_or_compiling_nothing_fails() -> None:
    with pytest.raises(AssertionError, match="variant 'jit' was never applied"):
        assert_variant_applied([], "jit", where="jax jit")
    with pytest.raises(AssertionError, match="compiled nothing"):
        assert_variant_applied([0], "jit", where="jax jit")
    assert_variant_applied([], "eager")


def test_retrace_eager_census_and_plausibility_checks_fail_on_broken_counts() -> None:
    assert_no_retrace(0, 0)
    with pytest.raises(AssertionError, match="compiled during timing: 2 new trace"):
        assert_no_retrace(2, 0, where="x")
    assert_eager({"build": 0, "check": 0}, "eager")
    assert_eager({"check": 1}, "jit")
    with pytest.raises(AssertionError, match=r"the eager variant compiled \(1 during timing\)"):
        assert_eager({"check": 0, "timing": 1}, "eager")
    assert_census(None, 10, what="nothing")
    with pytest.raises(AssertionError, match="hold 11 trainable elements, the spec's parameters "
                                             "10"):
        assert_census(11, 10, what="2 trainable nn.Parameter(s)")
    assert_plausible(100.0, 100.0, margin=0.25)
    assert_plausible(None, 100.0, margin=0.25)
    with pytest.raises(AssertionError, match="physically implausible: 126.0 GFLOP/s"):
        assert_plausible(126.0, 100.0, margin=0.25)


def test_tolerance_table_covers_every_policy() -> None:
    assert set(TOLERANCES) == set(POLICIES)
    for tol in TOLERANCES.values():
        assert tol.grad.rtol <= tol.trajectory.rtol


def test_same_seed_same_bytes_and_digest() -> None:
    policy = POLICIES["fp32"]
    a = data.seeded_start(MLP, SMOKE, 3, policy)
    b = data.seeded_start(MLP, SMOKE, 3, policy)
    c = data.seeded_start(MLP, SMOKE, 4, policy)
    assert data.digest(*a) == data.digest(*b) != data.digest(*c)
