"""Discovery's rules for the task kinds: declarations that would silently match nothing, and
a Hessian-vector product without the objective it is of, are reported as problems of the
folder, each one line naming the rule."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pytest_mlbench import Tolerance, infer, sgd, train, transform
from pytest_mlbench.workloads import catalogue

MODELS = catalogue.load_suite_file(Path(__file__).resolve().parents[2] / "kinds" / "models.py")


def problems(**changes: object) -> list[str]:
    spec = MODELS.mlp("rules", (train(sgd(0.1)), transform("hvp"), infer()), jax=("jit",))
    return dataclasses.replace(spec, **changes).problems()


def test_the_tests_mlp_breaks_no_rule() -> None:
    assert problems() == []


def test_an_unsupported_key_with_a_typo_is_reported() -> None:
    found = problems(unsupported={("tensorflow", "jacfwd"): "no forward-mode Jacobian",
                                  ("jax", "hvp"): "fine"})
    assert found == ["unsupported key ('tensorflow', 'jacfwd') names ['jacfwd', 'tensorflow'], "
                     "which is no framework, variant, device, precision or task label of this "
                     "spec"]


def test_a_tolerance_for_no_precision_is_reported() -> None:
    found = problems(tolerances={"float32": Tolerance(1e-3, 1e-3)})
    assert len(found) == 1 and found[0].startswith("tolerances['float32'] must map a precision")


def test_a_depth_that_is_no_positive_integer_is_reported_in_one_line() -> None:
    assert problems(depth=3) == [] and problems(depth=lambda d: d["batch"] // 8) == []
    for bad, said in ((0, "depth=0 (int) at dims"), (2.5, "depth=2.5 (float) at dims"),
                      (lambda d: d["nope"], "depth raised KeyError: 'nope' for dims")):
        found = problems(depth=bad)
        assert len(found) == 1 and found[0].startswith(said), found


def test_a_mixed_policys_tolerances_grow_with_the_square_root_of_depth() -> None:
    """amp's table is one layer's (bfloat16's unit roundoff times MIXED_UNITS); four layers
    double it; a workload's own override is taken where it is wider than the rule; other
    policies ignore depth."""
    from pytest_mlbench.checking.asserts import MIXED_UNITS, TOLERANCES, Tolerances, tolerances

    one = tolerances("amp")
    assert one.grad.rtol == MIXED_UNITS[0] * 2.0 ** -8 and one.trajectory.rtol == MIXED_UNITS[1] * 2.0 ** -8
    four = tolerances("amp", depth=4)
    assert four.grad.rtol == 2 * one.grad.rtol and four.trajectory.atol == 2 * one.trajectory.atol
    own = Tolerances(Tolerance(0.3, 0.3), Tolerance(0.4, 0.4))
    assert tolerances("amp", {"amp": own}, depth=16) is own
    assert tolerances("fp32", depth=16) is TOLERANCES["fp32"]
    # an override widens the rule, never narrows it: at 81 layers the rule's 0.211 and 0.422
    # pass the override's 0.2 and 0.3 (suites/vit's gpu size, 74 layers: 0.202 and 0.403)
    narrow = Tolerances(Tolerance(0.2, 0.2), Tolerance(0.3, 0.3))
    deep = tolerances("amp", {"amp": narrow}, depth=81)
    assert deep.grad.rtol == 9 * one.grad.rtol and deep.trajectory.atol == 9 * one.trajectory.atol
    assert tolerances("amp", {"amp": narrow}, depth=4) is narrow


def test_a_variant_is_a_mode_or_a_mode_and_an_idiom() -> None:
    """jit+sdpa is a variant (mode jit, idiom sdpa); a typo in either half is one line."""
    from pytest_mlbench import variants

    assert (variants.mode("jit+sdpa"), variants.idiom("jit+sdpa")) == ("jit", "sdpa")
    assert (variants.mode("eager"), variants.idiom("eager")) == ("eager", "")
    assert problems(implementations={"jax": ("jit", "jit+sdpa", "eager+scan_2")}) == []
    found = problems(implementations={"jax": ("jti+sdpa", "jit+Fused", "jit+")})
    assert found == [
        "implementations['jax']: variant 'jti+sdpa': its mode 'jti' is none of eager, jit, xla "
        "(a variant is a mode, or mode+idiom such as jit+sdpa)",
        "implementations['jax']: variant 'jit+Fused': the idiom after '+' must be lower-case "
        "letters, digits and underscores, starting with a letter",
        "implementations['jax']: variant 'jit+': the idiom after '+' must be lower-case "
        "letters, digits and underscores, starting with a letter"]


def test_an_hvp_needs_the_objective() -> None:
    assert "an hvp task needs objective(xp, outputs, data)" in problems(objective=None)[0]


def test_inference_needs_a_forward() -> None:
    assert any("need forward(xp, params, data)" in p for p in problems(forward=None))


def test_a_training_batch_draws_the_same_rows_of_every_array_at_the_datas_dtype() -> None:
    """data.batch: key 0 is the seeded data as they are; another key draws rows with
    replacement, the same rows of every array, copied (dtype and bytes kept), so a float64
    reference drawing from widened data gets the same batch widened."""
    from types import SimpleNamespace

    import numpy as np

    from pytest_mlbench.workloads import data

    workload = SimpleNamespace(name="w", data_key="", check_steps=3)
    shape = SimpleNamespace(label="s")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 4)).astype(np.float32)
    inputs = {"x": x, "y": np.arange(32, dtype=np.int32)}
    assert data.batch(workload, shape, inputs, 0)["x"] is x
    found = data.batch(workload, shape, inputs, 12345)
    assert found["x"].dtype == np.float32 and found["x"].shape == x.shape
    assert np.array_equal(found["x"], x[found["y"]])  # the same rows of both arrays
    assert not np.array_equal(found["y"], inputs["y"])
    wide = data.batch(workload, shape, data.widen(inputs), 12345)
    assert np.array_equal(wide["x"], found["x"].astype(np.float64))
    assert not np.array_equal(data.batch(workload, shape, inputs, 54321)["y"], found["y"])
