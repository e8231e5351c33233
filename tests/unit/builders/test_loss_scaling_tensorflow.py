"""The TensorFlow builder's trainer under amp16 (float16 compute, dynamic loss scaling through
Keras's LossScaleOptimizer), on the seed MLP in every compile mode: it reports the policy's
start scale, skips a step whose scaled gradients overflow float16 and halves the scale, and
recovers gradients that float16 would flush to zero without the scale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import train
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads import catalogue, data
from pytest_mlbench.workloads.case import Case
from pytest_mlbench.workloads.optim import adam

tf = pytest.importorskip("tensorflow")
from pytest_mlbench.builders import functional, tensorflow_  # noqa: E402
from pytest_mlbench.frameworks.tensorflow_ import TensorflowAdapter  # noqa: E402

MODELS = catalogue.load_suite_file(Path(__file__).resolve().parents[2] / "kinds" / "models.py")
AMP16 = POLICIES["amp16"]
VARIANTS = ("eager", "jit", "xla")
TINY = 2.0 ** -20  # a loss this small has gradients below float16's smallest normal (2^-14)


def forward(p: dict[str, Any], d: dict[str, Any]) -> Any:
    return tf.tanh(d["x"] @ p["w1"]) @ p["w2"]


def loss(p: dict[str, Any], d: dict[str, Any]) -> Any:
    z = forward(p, d)
    return tf.reduce_mean(tf.math.softplus(z) - d["y"] * z)


def tiny_loss(p: dict[str, Any], d: dict[str, Any]) -> Any:
    """The seed MLP's loss times 2^-20 (exact at float16): its gradients are 2^-20 times the
    seed MLP's, the cotangents inside of the order of 2^-25, float16's subnormals."""
    return TINY * loss(p, d)


def a_case(variant: str, y_scale: float = 1.0) -> Case:
    """The seed MLP under amp16 with Adam; the targets times ``y_scale``."""
    workload = MODELS.mlp("unit", (train(adam(1e-3)),), tensorflow=(variant,))
    return MODELS.unit_case(workload, "tensorflow", TensorflowAdapter(),  # type: ignore[no-any-return]
                            variant, AMP16, {"y": y_scale})


def numpy(tree: dict[str, Any]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in tree.items()}


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_trainer_reports_the_policys_start_scale(variant: str) -> None:
    trainer = tensorflow_.build(functional.tensorflow(forward, loss).model,  # type: ignore[attr-defined]
                                a_case(variant))
    assert float(trainer.loss_scale()) == AMP16.loss_scale == 2.0 ** 12


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_step_whose_scaled_gradients_overflow_is_skipped_and_halves_the_scale(
        variant: str) -> None:
    """Targets of 1000: the unscaled gradients are finite at float16 (about 1000 / 16 a
    logit), scaled by 2^12 they pass float16's largest value (65504)."""
    trainer = tensorflow_.build(functional.tensorflow(forward, loss).model,  # type: ignore[attr-defined]
                                a_case(variant, y_scale=1000.0))
    before = numpy(trainer.params())
    trainer.step()
    after = numpy(trainer.params())
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    state = numpy(trainer.state())
    assert float(state["count"]) == 0.0  # Adam did not count the step
    assert float(trainer.loss_scale()) == 2.0 ** 11


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_too_small_for_float16_come_out_right_with_the_scale(variant: str) -> None:
    """Against float64: the gradients ``loss_and_grads`` reports (unscaled, without a step)
    within float16's rounding of the inputs, where without the scale most of the cotangents
    round to zero or to one of float16's few subnormals."""
    case = a_case(variant)
    trainer = tensorflow_.build(functional.tensorflow(forward, tiny_loss).model,  # type: ignore[attr-defined]
                                case)
    before = numpy(trainer.params())
    _, grads = trainer.loss_and_grads()
    expected = MODELS.grad(data.widen(numpy(case.params)), data.widen(numpy(case.data)))
    for name, want in expected.items():
        got = np.asarray(grads[name], np.float64)
        error = np.linalg.norm(got - TINY * want) / np.linalg.norm(TINY * want)
        assert error < 1e-2, (name, error)
    after = numpy(trainer.params())
    assert all(np.array_equal(after[k], before[k]) for k in before)  # no step taken
