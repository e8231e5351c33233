"""The workload catalogue: workload-declared default precisions, the linreg and mlp_layers specs,
their float64 references, and the checks before timing catching broken layer-API
implementations (tests/gate.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import frameworks
from pytest_mlbench.checking.oracle_client import OracleService
from pytest_mlbench.checking.reference import Reference
from pytest_mlbench.options import OptionError, build_settings, option_table
from pytest_mlbench.parametrize import enumerate_cases, precisions_for
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads import catalogue, data
from pytest_mlbench.workloads.case import Case
from pytest_mlbench.workloads.spec import Workload
from tests.gate import SUITES, check

SEED = 0
LAYER_FRAMEWORKS = ("torch", "jax", "tensorflow")


def spec(name: str) -> Workload:
    """One workload, loaded as the catalogue loads it (not via discover, so a half-written
    neighbour folder cannot break these tests)."""
    return catalogue.load_workload(SUITES / name)


def settings(**raw: str) -> Any:
    return build_settings(raw, option_table())


def ids(workload: Workload, size: str = "default", **raw: str) -> list[str]:
    chosen = settings(size=size, **raw)
    return [c.name for c in enumerate_cases((workload,), chosen, frameworks.BUILTIN)]


# --- default precision: the workload's, unless the user named one --------------------------

def test_precision_left_unset_is_auto_with_fp32_fallback() -> None:
    s = settings()
    assert s.precision_auto and s.precisions == ("fp32",)


@pytest.mark.parametrize("given", ["fp32", "fp64,fp32", "all"])
def test_precision_given_is_not_auto(given: str) -> None:
    s = settings(precision=given)
    assert not s.precision_auto and "auto" not in s.precisions


def test_auto_cannot_be_mixed_with_policies() -> None:
    with pytest.raises(OptionError, match="--mlbench-precision: unknown value 'auto'"):
        settings(precision="auto,fp64")


def test_workload_default_precisions_apply_only_when_none_given() -> None:
    linreg, mlp = spec("linreg"), spec("mlp")
    assert precisions_for(linreg, settings()) == ("fp64",)
    assert precisions_for(mlp, settings()) == ("fp32",)  # declares none: session fallback
    assert precisions_for(linreg, settings(precision="fp32")) == ("fp32",)
    assert precisions_for(mlp, settings(precision="fp64")) == ("fp64",)


@pytest.mark.parametrize("bad", [(), ("fp65",)])
def test_workload_rejects_unknown_default_precisions(bad: tuple[str, ...]) -> None:
    broken = dataclasses.replace(spec("linreg"), default_precisions=bad)
    assert any("default_precisions" in p for p in broken.problems())


def test_plugin_honours_workload_precision_unless_given(pytester: pytest.Pytester) -> None:
    """End to end through option, ini and collection: fp64 by default, the user's choice wins."""
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "linreg").symlink_to(SUITES / "linreg")
    pytester.makepyfile(test_it="def test_train_step(mlbench_case):\n    pass\n")
    args = ("--co", "-q", "--mlbench-size=smoke", "--mlbench-frameworks=numpy")
    pytester.runpytest(*args).stdout.fnmatch_lines(["*[[]linreg-d2-numpy-eager-cpu-fp64]"])
    given = pytester.runpytest(*args, "--mlbench-precision=fp32")
    given.stdout.fnmatch_lines(["*[[]linreg-d2-numpy-eager-cpu-fp32]"])
    pytester.makeini("[pytest]\nmlbench_precision = fp32\n")
    pytester.runpytest(*args).stdout.fnmatch_lines(["*[[]linreg-d2-numpy-eager-cpu-fp32]"])


# --- the specs ----------------------------------------------------------------------------

def test_linreg_sweeps_dimension_in_the_id() -> None:
    linreg = spec("linreg")
    assert [s.label for s in linreg.sizes["default"]] == ["d2", "d5", "d10", "d20", "d50", "d100"]
    assert all(s.dims["n"] == 10_000 for s in linreg.sizes["default"])
    assert [s.label for s in linreg.sizes["smoke"]] == ["d2", "d100"]
    assert "linreg-d10-jax-jit-cpu-fp64" in ids(linreg)
    assert "linreg-d10-jax-jit-cpu-fp32" in ids(linreg, precision="fp32")


def test_linreg_paper_runs_more_steps_per_call() -> None:
    linreg = spec("linreg")
    for default, paper in zip(linreg.sizes["default"], linreg.sizes["paper"], strict=True):
        assert paper.dims == default.dims and paper.steps_per_call > default.steps_per_call


def test_mlp_layers_shares_the_mlp_reference_and_ids() -> None:
    layers, mlp = spec("mlp_layers"), spec("mlp")
    for name in ("sizes", "make_data", "make_params", "loss", "grad", "flops_per_step"):
        assert getattr(layers, name) is getattr(mlp, name), name
    assert layers.all_tasks == mlp.all_tasks
    # the plain modes: the layer models' trainers are their own (no builder's step idiom)
    assert set(ids(layers)) == {n.replace("mlp-", "mlp_layers-", 1) for n in ids(mlp)
                                if n.split("-")[1] in LAYER_FRAMEWORKS and "-w" not in n
                                and "+" not in n}


def test_mlp_layers_starts_from_the_mlp_bytes() -> None:
    """Byte-identical data and weights, so the layer and matmul rows compare directly."""
    policy, shape = POLICIES["fp32"], spec("mlp").sizes["smoke"][0]
    layers = data.seeded_start(spec("mlp_layers"), shape, 0, policy)
    mlp = data.seeded_start(spec("mlp"), shape, 0, policy)
    assert data.digest(*layers) == data.digest(*mlp)


@pytest.mark.parametrize("name", ["linreg", "mlp_layers"])
@pytest.mark.parametrize("size", ["smoke", "default"])
def test_reference_gradient_matches_finite_differences(name: str, size: str) -> None:
    workload = spec(name)
    for shape in workload.sizes[size]:
        inputs, params = data.seeded_start(workload, shape, SEED, POLICIES["fp64"])
        Reference(workload, shape, SEED, str(SUITES / name), OracleService()).verify(
            workload.all_tasks[0], inputs, params, None)


def test_linreg_reference_recovers_the_true_model() -> None:
    """Enough plain gradient descent on the reference reaches the noise floor: the data really
    is a linear model plus N(0, 0.1^2) noise and the learning rate is stable."""
    linreg = spec("linreg")
    shape = linreg.sizes["smoke"][0]
    inputs, params = data.seeded_start(linreg, shape, SEED, POLICIES["fp64"])
    reference = Reference(linreg, shape, SEED, str(SUITES / "linreg"), OracleService())
    optimizer = linreg.all_tasks[0].optimizer
    assert optimizer is not None
    losses, _, _ = reference.train(optimizer, params, {}, inputs, 1_000, np.float64)
    assert losses[-1] < 0.02 < losses[0]  # 0.01 is the noise variance


# --- the checks catch broken layer implementations -------------------------------------------

@pytest.mark.parametrize("framework", LAYER_FRAMEWORKS)
def test_layer_implementation_passes_the_checks(framework: str) -> None:
    pytest.importorskip(framework)
    check("mlp_layers", framework)


@pytest.mark.parametrize("framework", LAYER_FRAMEWORKS)
def test_layer_implementation_with_wrong_learning_rate_fails_the_checks(
        framework: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What went wrong in the seed article: an implementation stepping at another rate (1e-3)
    than the spec declares (1e-2)."""
    pytest.importorskip(framework)
    monkeypatch.setattr(Case, "learning_rate", property(lambda case: case.optimizer.lr / 10))
    with pytest.raises(AssertionError, match=r"first sgd step \(lr=0.01\), displacement of w"):
        check("mlp_layers", framework)


def test_torch_layers_without_the_transpose_fail_the_checks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """nn.Linear's weight is the transpose of the matmul weight: copying w1 in as it is (it is
    square, so no shape error warns) starts from other weights, caught before any timing."""
    pytest.importorskip("torch")
    module = catalogue.implementation(SUITES, spec("mlp_layers"), "torch")
    make_model = module.make_model
    monkeypatch.setattr(module.Trainer, "make_model",
                        staticmethod(lambda w1, w2: make_model(w1.T, w2)))
    with pytest.raises(AssertionError, match=r"initial params .* w1: not the same bytes"):
        check("mlp_layers", "torch")
