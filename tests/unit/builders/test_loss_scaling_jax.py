"""The JAX builder's dynamic loss scale under amp16 (builders/jax_.py loss_scaled: JAX and
optax have none of their own), on the kinds' seed MLP (the project's suites/mlp JAX model)
eager, jitted and jitted with donation: the scale it reports, a step whose scaled gradient
overflows float16 skipped and the scale halved, the growth rule, and gradients that float16
alone underflows coming out right against float64."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import momentum, train
from pytest_mlbench.precision import BACKOFF, POLICIES, Policy
from pytest_mlbench.workloads import catalogue, data
from pytest_mlbench.workloads.case import Case

pytest.importorskip("jax")
from pytest_mlbench.builders import functional, jax_  # noqa: E402
from pytest_mlbench.frameworks.jax_ import JaxAdapter  # noqa: E402

MODELS = catalogue.load_suite_file(Path(__file__).resolve().parents[2] / "kinds" / "models.py")
AMP16 = POLICIES["amp16"]
BUILD = functional.jax(*MODELS.jax_model())
VARIANTS = ("eager", "jit", "jit+donate")


def a_case(variant: str, policy: Policy = AMP16, *, w2: float = 1.0, y: float = 1.0) -> Case:
    """The seed MLP's momentum step at ``policy``, its w2 and labels scaled by ``w2``, ``y``."""
    workload = MODELS.mlp("unit", (train(momentum(0.1)),), jax=VARIANTS)
    return MODELS.unit_case(workload, "jax", JaxAdapter(), variant, policy,  # type: ignore[no-any-return]
                            {"w2": w2, "y": y})


def host(named: dict[str, Any]) -> dict[str, np.ndarray]:
    """Copies on the host (a donating step consumes the arrays it is given)."""
    return {k: np.array(v) for k, v in named.items()}


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_trainer_reports_its_scale_and_a_finite_step_keeps_it(variant: str) -> None:
    case = a_case(variant)
    trainer = BUILD(case)
    assert float(trainer.loss_scale()) == AMP16.loss_scale == 2.0 ** 12
    before = host(trainer.params())
    expected = MODELS.loss(data.widen(case.params), data.widen(case.data))
    assert float(trainer.step()) == pytest.approx(expected, rel=1e-2)  # the unscaled loss
    assert float(trainer.loss_scale()) == 2.0 ** 12
    assert not np.array_equal(host(trainer.params())["w1"], before["w1"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_step_whose_scaled_gradient_overflows_is_skipped_and_halves_the_scale(
        variant: str) -> None:
    """Labels of 1000: the loss's gradient about 60 a logit, times 2^12 past float16's 65504."""
    trainer = BUILD(a_case(variant, y=1000.0))
    params, state = host(trainer.params()), host(trainer.state())
    loss = float(trainer.step())
    assert np.isfinite(loss)  # the loss itself is fine, and reported unscaled
    assert float(trainer.loss_scale()) == 2.0 ** 12 * BACKOFF
    for name, value in host(trainer.params()).items():
        np.testing.assert_array_equal(value, params[name])
    for name, value in host(trainer.state()).items():
        np.testing.assert_array_equal(value, state[name])


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_scale_grows_after_the_interval_of_finite_steps_in_a_row(
        variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """GROWTH_INTERVAL 2 (read when the step is traced): finite, overflow, finite, finite."""
    monkeypatch.setattr(jax_, "GROWTH_INTERVAL", 2)
    case = a_case(variant)
    trainer, labels = BUILD(case), np.array(case.data["y"])
    scales = []
    for y in (1.0, 1000.0, 1.0, 1.0):
        case.feed({"y": case.adapter.asarray(labels * y)})
        trainer.step()
        scales.append(float(trainer.loss_scale()))
    assert scales == [2.0 ** 12, 2.0 ** 11, 2.0 ** 11, 2.0 ** 12]


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_float16_underflows_come_out_right_with_the_scale(variant: str) -> None:
    """w2 at 1e-4 of its start: w1's gradient is about 1e-5, where float16's subnormals keep
    2 or 3 digits; scaled by 2^12 it is a normal float16, within 1% of float64 in norm."""
    case = a_case(variant, w2=1e-4)
    _, grads = BUILD(case).loss_and_grads()
    expected = MODELS.grad(data.widen(case.params), data.widen(case.data))
    assert relative_error(grads["w1"], expected["w1"]) < 1e-2


def test_without_the_scale_the_same_gradient_is_wrong() -> None:
    """The control: a scale of 1 gives the test above's gradient over 10% off."""
    case = a_case("jit", dataclasses.replace(AMP16, loss_scale=1.0), w2=1e-4)
    _, grads = BUILD(case).loss_and_grads()
    expected = MODELS.grad(data.widen(case.params), data.widen(case.data))
    assert relative_error(grads["w1"], expected["w1"]) > 5e-2


def test_other_policies_have_no_loss_scale() -> None:
    trainer = BUILD(a_case("jit", POLICIES["amp"]))
    assert not hasattr(trainer, "loss_scale")


def relative_error(actual: Any, expected: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(actual, np.float64) - expected)
                 / np.linalg.norm(expected))
