"""The float64 autodiff oracle (JAX x64 and torch float64, in workers of their own): its
gradients and transforms agree with finite differences of the NumPy forward and with each
other; a wrong oracle, a forward that computes differently in another array namespace, and
two oracles that disagree each fail the reference's verification, saying which."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import transform
from pytest_mlbench.checking.oracle_client import OracleService
from pytest_mlbench.checking.reference import Reference
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads import catalogue, data

MODELS = Path(__file__).resolve().parents[2] / "kinds" / "models.py"
SUITES = Path(__file__).resolve().parents[3] / "suites"
FP64 = POLICIES["fp64"]
TASKS = "(train(sgd(0.1)), infer(), *(transform(n) for n in TRANSFORMS))"
# the tests' MLP with its model only (no hand gradient: the oracle is the reference)
SPEC = f"""
import dataclasses
from pytest_mlbench import infer, load_suite_file, sgd, train, transform
MODELS = load_suite_file({str(MODELS)!r})
TRANSFORMS = ("jvp", "vjp", "hvp", "jacfwd", "jacrev")
SPEC = dataclasses.replace(MODELS.mlp("{{name}}", {TASKS}), loss=None, grad=None{{extra}})
"""
# forward in jax and torch (the oracle's namespaces) is not NumPy's: sin for tanh
TWO_FACED = """
def forward(xp, p, d):
    act = xp.tanh if xp.__name__.startswith("numpy") else xp.sin
    return act(d["x"] @ p["w1"]) @ p["w2"]
"""


def write_spec(root: Path, name: str, extra: str = "", prelude: str = "") -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "spec.py").write_text(prelude + SPEC.format(name=name, extra=extra))
    return folder


@pytest.fixture(scope="module")
def oracle() -> Iterator[OracleService]:
    service = OracleService()
    if service.backends != ["jax", "torch"]:
        pytest.skip("the oracle tests need both jax and torch")
    yield service
    service.close()


def reference(folder: Path, service: Any, seed: int = 0) -> tuple[Reference, Any, Any]:
    workload = catalogue.load_workload(folder)
    shape = workload.sizes["smoke"][0]
    inputs, params = data.seeded_start(workload, shape, seed, FP64)
    return Reference(workload, shape, seed, str(folder), service), inputs, params


def verify(ref: Reference, inputs: Any, params: Any, label: str) -> None:
    task = ref.workload.task(label)
    probe = None
    if task.kind != "train":
        out = ref.workload.forward(np, data.widen(params), data.widen(inputs))
        probe = data.probe(ref.workload, ref.shape, task, ref.seed, 0, FP64, params,
                           tuple(np.shape(out)))
    ref.verify(task, inputs, params, probe)


class Perturbed:
    """The module's oracle, with its answers to ``command`` (from ``backend``, or any) 1% off:
    the same workers, so no test starts an oracle of its own (each cost a JAX and a torch
    process, 5-13 s here)."""

    def __init__(self, service: OracleService, command: str, backend: str | None = None) -> None:
        self.service, self.command, self.backend = service, command, backend

    @property
    def backends(self) -> list[str]:
        return self.service.backends

    def call(self, command: str, payload: Any, backend: str | None = None) -> Any:
        found = self.service.call(command, payload, backend)
        if command != self.command or self.backend not in (None, backend):
            return found
        if isinstance(found, tuple):
            return found[0], {k: 1.01 * v for k, v in found[1].items()}
        if isinstance(found, dict):
            return {k: 1.01 * v for k, v in found.items()}
        return 1.01 * found


# -- the oracle is right ------------------------------------------------------------------------

@pytest.mark.parametrize("label", ["sgd", "infer", "jvp", "vjp", "hvp", "jacfwd", "jacrev"])
def test_every_kind_verifies_against_finite_differences_and_both_oracles(
        tmp_path: Path, oracle: OracleService, label: str) -> None:
    ref, inputs, params = reference(write_spec(tmp_path, "plain"), oracle)
    verify(ref, inputs, params, label)


def test_the_oracle_gradient_is_the_hand_derived_one(tmp_path: Path,
                                                     oracle: OracleService) -> None:
    ref, inputs, params = reference(write_spec(tmp_path, "plain"), oracle)
    loss, grads = ref.loss_and_grad(params, inputs)
    hand = catalogue.load_suite_file(MODELS)
    p, d = data.widen(params), data.widen(inputs)
    assert loss == pytest.approx(hand.loss(p, d), rel=1e-12)
    for key, expected in hand.grad(p, d).items():
        np.testing.assert_allclose(grads[key], expected, rtol=1e-10, atol=1e-15)


# -- and when it is not, verification says so --------------------------------------------------

def test_a_wrong_oracle_gradient_fails_finite_differences(tmp_path: Path,
                                                          oracle: OracleService) -> None:
    service = Perturbed(oracle, "value_and_grad")
    ref, inputs, params = reference(write_spec(tmp_path, "plain"), service)
    with pytest.raises(AssertionError, match=r"plain reference gradient direction 0: "
                                             r"<gradient, v> = .* but central differences"):
        verify(ref, inputs, params, "sgd")


@pytest.mark.parametrize(("label", "pattern"), [
    ("sgd", r"gradient direction \d: <gradient, v> = .* but central differences give"),
    ("infer", r"the forward in jax against NumPy's: differs by"),
    ("jvp", r"jvp, eps [\d.e-]+: differs by"),
    ("jacrev", r"jacrev \(Jacobian times a direction\), eps [\d.e-]+: differs by"),
])
def test_a_forward_that_is_another_function_in_the_oracle_fails(
        tmp_path: Path, oracle: OracleService, label: str, pattern: str) -> None:
    folder = write_spec(tmp_path, "twofaced", extra=", forward=forward",
                        prelude=TWO_FACED)
    ref, inputs, params = reference(folder, oracle)
    with pytest.raises(AssertionError, match=pattern):
        verify(ref, inputs, params, label)


@pytest.mark.parametrize("label", ["sgd", "jvp", "hvp"])
def test_oracles_that_disagree_fail_the_cross_check(tmp_path: Path, oracle: OracleService,
                                                    label: str) -> None:
    command = {"sgd": "value_and_grad"}.get(label, label)
    service = Perturbed(oracle, command, backend="torch")
    ref, inputs, params = reference(write_spec(tmp_path, "plain"), service)
    task = ref.workload.task(label)
    d, p = data.widen(inputs), data.widen(params)
    probe = None if label == "sgd" else data.probe(ref.workload, ref.shape, task, 0, 0,
                                                   FP64, params, None)
    with pytest.raises(AssertionError, match=re.escape(
            f"plain reference: jax and torch oracles disagree on {command}")):
        ref._cross_check(task, d, p, probe, "plain reference")


# -- non-smooth models: the verdict does not depend on the seed ---------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_relu_and_max_pooling_verify_at_every_seed(oracle: OracleService, seed: int) -> None:
    ref, inputs, params = reference(SUITES / "cnn", oracle, seed)
    verify(ref, inputs, params, ref.workload.all_tasks[0].label)


def test_transform_constructor_names_the_choices() -> None:
    with pytest.raises(ValueError, match="transform 'jvpp': choose from jvp, vjp, hvp"):
        transform("jvpp")
