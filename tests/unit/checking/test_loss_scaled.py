"""checking/asserts.py assert_loss_scaled: training under amp16 kept a dynamic loss scale (one
the trainer reports, a finite power of two of at least 1); other policies are not asked."""

from __future__ import annotations

import math

import pytest

from pytest_mlbench.checking.asserts import assert_loss_scaled
from pytest_mlbench.precision import POLICIES

AMP16 = POLICIES["amp16"]


@pytest.mark.parametrize("scale", [AMP16.loss_scale, 1.0, 2.0 ** 15, 0.5 * AMP16.loss_scale])
def test_a_dynamic_scale_passes(scale: float) -> None:
    assert_loss_scaled(scale, AMP16, where="case x")


def test_no_scale_reported_fails_saying_what_amp16_trains_with() -> None:
    with pytest.raises(AssertionError, match=r"^case x: the amp16 policy trains with a dynamic "
                                             r"loss scale, and this trainer reports none"):
        assert_loss_scaled(None, AMP16, where="case x")


@pytest.mark.parametrize("scale", [math.inf, math.nan, 0.0, 0.25, 3000.0, -4096.0])
def test_a_scale_no_dynamic_rule_leaves_fails(scale: float) -> None:
    with pytest.raises(AssertionError, match=r"the loss scale after timing is .*a power of two"):
        assert_loss_scaled(scale, AMP16, where="case x")


@pytest.mark.parametrize("policy", ["fp32", "amp", "bf16", "fp64"])
def test_policies_without_loss_scaling_are_not_asked(policy: str) -> None:
    assert_loss_scaled(None, POLICIES[policy], where="case x")
