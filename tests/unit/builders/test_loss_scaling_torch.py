"""The torch builder's trainer under amp16 (float16 autocast, torch.amp.GradScaler), in-process
on a tiny linear model: it reports its dynamic loss scale, skips a step whose scaled gradients
overflow float16 and halves the scale, and its gradients, computed through the scaled backward,
are right where float16 without scaling flushes them to zero."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import sgd, train
from pytest_mlbench.builders import functional
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads.case import Case

torch = pytest.importorskip("torch")
from pytest_mlbench.frameworks.torch_ import TorchAdapter  # noqa: E402

AMP16 = POLICIES["amp16"]
BATCH, IN, OUT = 16, 8, 4
TINY = 1e-8  # d loss / d (x @ w): 0 in float16 (its least subnormal is 6e-8), 4e-5 scaled


def loss(p: dict[str, Any], d: dict[str, Any]) -> Any:
    """sum((x @ w) * c): x @ w at float16 under autocast, so its backward (c, scaled, through
    the float16 matmul) is where small gradients underflow and large ones overflow."""
    return ((d["x"] @ p["w"]) * d["c"]).sum()


BUILD = functional.torch(loss=loss)


def trainer(x: float | None = None, c: float = 1.0, variant: str = "eager") -> Any:
    """The builder's amp16 trainer: w and x seeded (x set to ``x`` everywhere if given), every
    c equal to ``c``; plain SGD."""
    rng = np.random.default_rng(16)
    xs = rng.standard_normal((BATCH, IN)) if x is None else np.full((BATCH, IN), x)
    data = {"x": torch.tensor(xs, dtype=torch.float32),
            "c": torch.full((BATCH, OUT), c, dtype=torch.float32)}
    params = {"w": torch.tensor(0.1 * rng.standard_normal((IN, OUT)), dtype=torch.float32)}
    cid = SimpleNamespace(task=train(sgd(1e-3)), variant=variant,
                          name=f"loss-scaling-torch-{variant}-cpu-amp16")
    return BUILD(Case(cid, TorchAdapter(), AMP16, data, params, seed=0))  # type: ignore[arg-type]


def scale_of(built: Any) -> float:
    return float(built.loss_scale())


def test_the_trainer_reports_its_loss_scale_from_the_policys_start() -> None:
    built, fresh = trainer(), trainer()
    assert scale_of(built) == AMP16.loss_scale == 2.0 ** 12
    start = built.params()["w"].clone()
    built.loss_and_grads()  # reads the gradients: the scale and the parameters stay
    assert scale_of(built) == 2.0 ** 12 and torch.equal(built.params()["w"], start)
    built.step()  # a finite step: the scale stays until GROWTH_INTERVAL of them
    assert scale_of(built) == 2.0 ** 12
    fresh.step()  # nor did reading the gradients change the step that follows
    assert torch.equal(built.params()["w"], fresh.params()["w"])


@pytest.mark.parametrize("variant", ["eager", "jit"])
def test_a_step_whose_scaled_gradients_overflow_is_skipped_and_halves_the_scale(
        variant: str) -> None:
    # d loss / dw = x^T c: 16 * 100 * 2^12 = 6.6e6 scaled, past float16's 65504
    built = trainer(x=100.0, variant=variant)
    before = built.params()["w"].clone()
    built.step()
    assert torch.equal(built.params()["w"], before), "the overflowed step moved the parameters"
    assert scale_of(built) == AMP16.loss_scale / 2
    built.step()  # 3.3e6: still too large
    assert torch.equal(built.params()["w"], before)
    assert scale_of(built) == AMP16.loss_scale / 4


def test_gradients_too_small_for_float16_come_out_right_with_the_scale() -> None:
    built = trainer(c=TINY)
    d, w = built.data, built.params()["w"]
    expected = d["x"].double().T @ d["c"].double()  # d/dw of sum((x @ w) * c), float64
    assert torch.tensor(TINY).half() == 0  # unscaled, the matmul's backward sees zeros
    _, grads = built.loss_and_grads()
    assert grads["w"].dtype == torch.float32
    error = float(torch.linalg.norm(grads["w"].double() - expected) / torch.linalg.norm(expected))
    assert error < 1e-2, f"the gradient is {error:.2g} of its norm off float64's"
    assert torch.equal(built.params()["w"], w) and scale_of(built) == AMP16.loss_scale
