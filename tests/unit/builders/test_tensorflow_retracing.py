"""TensorFlow's "N out of the last M calls to ... triggered tf.function retracing" warning is
not raised by the harness's own builder when one worker builds case after case (TF counts
traces per code object, so each new case's tf.function of the same method looked like a
retrace of the one before)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from pytest_mlbench import train
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads import catalogue
from pytest_mlbench.workloads.case import Case
from pytest_mlbench.workloads.optim import sgd

tf = pytest.importorskip("tensorflow")
from pytest_mlbench.builders import functional, tensorflow_  # noqa: E402
from pytest_mlbench.frameworks.tensorflow_ import TensorflowAdapter  # noqa: E402

MODELS = catalogue.load_suite_file(Path(__file__).resolve().parents[2] / "kinds" / "models.py")
FP32 = POLICIES["fp32"]
CASES = 8  # more than TF's threshold of five traces in its last ten calls


def forward(p: dict[str, Any], d: dict[str, Any]) -> Any:
    return tf.tanh(d["x"] @ p["w1"]) @ p["w2"]


def loss(p: dict[str, Any], d: dict[str, Any]) -> Any:
    z = forward(p, d)
    return tf.reduce_mean(tf.math.softplus(z) - d["y"] * z)


MODEL = functional.tensorflow(forward, loss).model  # type: ignore[attr-defined]


def a_case() -> Case:
    workload = MODELS.mlp("unit", (train(sgd(1e-2)),), tensorflow=("jit",))
    return MODELS.unit_case(workload, "tensorflow", TensorflowAdapter(),  # type: ignore[no-any-return]
                            "jit", FP32)


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def retracing_warnings(make: Any) -> list[str]:
    """The retracing warnings TF logs while ``make(case)`` builds and checks CASES cases."""
    handler, logger = Records(), logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        for _ in range(CASES):
            make(a_case()).loss_and_grads()
    finally:
        logger.removeHandler(handler)
    return [m for m in handler.messages if "triggered tf.function retracing" in m]


def test_case_after_case_the_builder_raises_no_retracing_warning() -> None:
    assert retracing_warnings(lambda case: tensorflow_.build(MODEL, case)) == []


def test_the_same_trainers_unquieted_do_raise_it() -> None:
    """The control: TF warns for the builder's Trainer made without build()'s quieting, so the
    test above would see a warning that came back."""
    found = retracing_warnings(lambda case: tensorflow_.Trainer(MODEL, case))
    assert found and "Trainer._loss_and_grads" in found[0], found
