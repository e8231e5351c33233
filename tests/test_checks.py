"""The correctness gate must fail on broken implementations, with a message that names the
framework, variant, worst element and tolerance. Each test feeds a deliberately broken
trainer (or broken numbers) to the real checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import catalogue, data, frameworks, timing
from pytest_mlbench.case import Case, CaseId
from pytest_mlbench.checks import (
    TOLERANCES,
    assert_allclose,
    assert_grad_matches_finite_differences,
    assert_no_retrace,
    assert_trajectory_close,
    assert_variant_applied,
)
from pytest_mlbench.harness import correctness_gate, seeded_start
from pytest_mlbench.precision import POLICIES

SUITES = Path(__file__).resolve().parents[1] / "suites"
MLP = catalogue.load_workload(SUITES / "mlp")
SMOKE = MLP.sizes["smoke"][0]
NUMPY_IMPL = catalogue.implementation(SUITES, MLP, "numpy")


def make_case(framework: str = "numpy", variant: str = "eager",
              precision: str = "fp32") -> tuple[Case, dict[str, Any], dict[str, Any]]:
    adapter = frameworks.load(framework, frameworks.BUILTIN)
    policy = POLICIES[precision]
    adapter.setup("cpu", policy, 0)
    inputs, params = seeded_start(MLP, SMOKE, 0, policy)
    cid = CaseId(MLP, SMOKE, framework, variant, "cpu", precision)
    case = Case(cid, adapter, policy, {k: adapter.asarray(v) for k, v in inputs.items()},
                {k: adapter.asarray(v) for k, v in params.items()}, 0)
    return case, inputs, params


def run_gate(trainer_cls: type, **kw: str) -> list[float]:
    case, inputs, params = make_case(**kw)
    return correctness_gate(case, trainer_cls(case), inputs, params, where="numpy eager (test)")


def broken(transform: Any) -> type:
    """The real NumPy trainer with its gradient passed through ``transform``."""

    class Broken(NUMPY_IMPL.Trainer):  # type: ignore[name-defined,misc]
        def loss_and_grads(self) -> Any:
            loss, g = super().loss_and_grads()
            return loss, transform(self, g)

    return Broken


def dropped_tanh_derivative(t: Any, g: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    h = np.tanh(t.x @ t.w1)
    dz = (0.5 * (1 + np.tanh(0.5 * (h @ t.w2))) - t.y) / len(t.x)
    return {"w1": t.x.T @ (dz @ t.w2.T), "w2": g["w2"]}


@pytest.mark.parametrize("transform", [
    pytest.param(lambda t, g: {k: -v for k, v in g.items()}, id="sign-flip"),
    pytest.param(lambda t, g: {k: v * len(t.x) for k, v in g.items()}, id="missing-1/batch"),
    pytest.param(lambda t, g: {"w1": g["w1"].T.copy(), "w2": g["w2"]}, id="wrong-transpose"),
    pytest.param(dropped_tanh_derivative, id="dropped-tanh-derivative"),
])
def test_broken_gradient_fails_naming_framework_worst_element_and_tolerance(transform: Any) -> None:
    with pytest.raises(AssertionError) as info:
        run_gate(broken(transform))
    message = str(info.value)
    assert "numpy eager" in message and "gradient of w" in message
    assert "worst at [" in message and "rtol 0.0001" in message


def test_the_correct_trainer_passes_the_same_gate() -> None:
    times = run_gate(NUMPY_IMPL.Trainer)
    assert len(times) == MLP.check_steps


def test_wrong_learning_rate_fails_the_first_step() -> None:
    class SlowLearner(NUMPY_IMPL.Trainer):  # type: ignore[name-defined,misc]
        def __init__(self, case: Case) -> None:
            super().__init__(case)
            self.lr = 1e-3  # the seed article's mix of 1e-2 and 1e-3

    with pytest.raises(AssertionError, match="first SGD step .lr=0.01., displacement of w"):
        run_gate(SlowLearner)


def test_wrong_dtype_fails() -> None:
    class Widening(NUMPY_IMPL.Trainer):  # type: ignore[name-defined,misc]
        def step(self) -> Any:  # float64 Autograd among float32 runs, as in the seed article
            self.w1, self.w2 = self.w1.astype(np.float64), self.w2.astype(np.float64)
            return super().step()

    with pytest.raises(AssertionError, match="dtype is not the policy's float32"):
        run_gate(Widening)


def test_different_start_bytes_fail() -> None:
    class OwnInit(NUMPY_IMPL.Trainer):  # type: ignore[name-defined,misc]
        def __init__(self, case: Case) -> None:
            super().__init__(case)
            self.w1 = self.w1 * 1.0001

    with pytest.raises(AssertionError, match="initial params w1: starts from .* not the seeded"):
        run_gate(OwnInit)


def test_a_bias_the_spec_does_not_declare_fails() -> None:
    class WithBias(NUMPY_IMPL.Trainer):  # type: ignore[name-defined,misc]
        def params(self) -> dict[str, np.ndarray]:
            return {**super().params(), "b1": np.zeros(128, np.float32)}

    with pytest.raises(AssertionError, match=r"extra \['b1'\]"):
        run_gate(WithBias)


def test_nan_trajectory_names_the_step() -> None:
    with pytest.raises(AssertionError, match="loss diverged to nan at step 2"):
        assert_trajectory_close([0.7, 0.69, float("nan")], [0.7, 0.69, 0.68], rtol=1e-3, atol=0)
    with pytest.raises(AssertionError, match="departs from the reference at step 1"):
        assert_trajectory_close([0.7, 0.8], [0.7, 0.69], rtol=1e-3, atol=0)


def test_allclose_reports_the_worst_element() -> None:
    expected = np.arange(6.0).reshape(2, 3)
    actual = expected.copy()
    actual[1, 2] += 1.0
    with pytest.raises(AssertionError, match=r"1 of 6 elements differ; worst at \[1, 2\]: "
                                             r"actual 6, expected 5"):
        assert_allclose(actual, expected, rtol=1e-6, atol=0, where="w")
    with pytest.raises(AssertionError, match="non-finite"):
        assert_allclose(np.array([np.inf]), np.array([1.0]), rtol=1, atol=1)


def test_finite_differences_catch_a_wrong_reference() -> None:
    inputs, params = seeded_start(MLP, SMOKE, 0, POLICIES["fp64"])
    good = MLP.grad(params, inputs)
    loss = lambda p: float(MLP.loss(p, inputs))  # noqa: E731
    rng = data.generator(0, "fd")
    assert_grad_matches_finite_differences(loss, good, params, rtol=1e-6, atol=1e-9, rng=rng)
    bad = {"w1": good["w1"], "w2": 2 * good["w2"]}
    with pytest.raises(AssertionError, match="central differences"):
        assert_grad_matches_finite_differences(loss, bad, params, rtol=1e-6, atol=1e-9, rng=rng)


def test_variant_never_applied_fails() -> None:
    with pytest.raises(AssertionError, match="variant 'jit' was never applied"):
        assert_variant_applied([], "jit", where="jax jit")
    with pytest.raises(AssertionError, match="compiled nothing"):
        assert_variant_applied([0], "jit", where="jax jit")
    assert_variant_applied([], "eager")


def test_no_retrace_passes_equal_counts() -> None:
    assert_no_retrace(3, 3)


class OneShotBenchmark:
    """pytest-benchmark's fixture with benchmarking disabled: calls the function once."""

    enabled = False
    stats = None

    def __init__(self) -> None:
        self.extra_info: dict[str, Any] = {}
        self.group = ""

    def __call__(self, fn: Any) -> Any:
        return fn()


def test_tolerance_table_covers_every_policy() -> None:
    assert set(TOLERANCES) == set(POLICIES)
    for tol in TOLERANCES.values():
        assert tol.grad.rtol <= tol.trajectory.rtol


def test_same_seed_same_bytes_and_digest() -> None:
    policy = POLICIES["fp32"]
    a = seeded_start(MLP, SMOKE, 3, policy)
    b = seeded_start(MLP, SMOKE, 3, policy)
    c = seeded_start(MLP, SMOKE, 4, policy)
    assert data.digest(*a) == data.digest(*b) != data.digest(*c)


def shrink_batch(trainer: Any) -> None:
    """One example fewer: a new static shape, which a compiled step must not absorb quietly."""
    if hasattr(trainer, "data"):  # a StepTrainer
        trainer.data = tuple(d[:-1] for d in trainer.data)
    else:
        trainer.x, trainer.y = trainer.x[:-1], trainer.y[:-1]


@pytest.mark.parametrize("framework", ["jax", "tensorflow", "torch"])
def test_retrace_guard_catches_a_recompiling_step(framework: str) -> None:
    """jax.jit and tf.function trace again on a new shape (the trace count rises);
    torch.compile is held to ``fail_on_recompile`` while timed, so the recompile raises."""
    pytest.importorskip(framework)
    case, _, _ = make_case(framework, "jit")
    trainer = catalogue.implementation(SUITES, MLP, framework).build(case)
    case.adapter.sync(trainer.step())  # the warm-up compile happens before timing, as in the gate
    original = trainer.step

    def shrinking_step() -> Any:
        shrink_batch(trainer)
        return original()

    trainer.step = shrinking_step
    with pytest.raises((AssertionError, RuntimeError), match="[Rr]ecompile"):
        timing.measure(OneShotBenchmark(), case, trainer, [1.0, 0.1], digest="x",
                       where=f"{framework} jit")
