"""The builders in-process, with NumPy and Autograd (no worker, no heavy framework): what each
kind's object reports, in canonical names and the spec's layout, and the one-line errors of a
builder used wrongly. The other frameworks' builders run in tests/sessions/test_kinds.py and in every
suite."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import adam, infer, momentum, train, transform
from pytest_mlbench.builders import functional
from pytest_mlbench.frameworks.numpy_ import NumpyAdapter
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads import catalogue, data
from pytest_mlbench.workloads.case import Case, CaseId

pytest.importorskip("autograd")
import autograd.numpy as anp  # noqa: E402

MODELS = catalogue.load_suite_file(Path(__file__).resolve().parents[2] / "kinds" / "models.py")
FP32 = POLICIES["fp32"]


def case_for(task: Any, framework: str = "autograd") -> Case:
    workload = MODELS.mlp("unit", (task,), **{framework: ("eager",)})
    shape = workload.sizes["smoke"][0]
    inputs, params = data.seeded_start(workload, shape, 0, FP32)
    cid = CaseId(workload, shape, task, framework, "eager", "cpu", "fp32")
    return Case(cid, NumpyAdapter(), FP32, inputs, params, 0)


def nested(flat: dict[str, Any]) -> dict[str, Any]:
    """A model tree of another structure and layout: w1 transposed, under "layers"."""
    return {"layers": [{"w": flat["w1"].T}, {"w": flat["w2"]}]}


def flattened(tree: dict[str, Any]) -> dict[str, Any]:
    return {"w1": tree["layers"][0]["w"].T, "w2": tree["layers"][1]["w"]}


def forward(p: dict[str, Any], d: dict[str, Any]) -> Any:
    return anp.tanh(d["x"] @ p["layers"][0]["w"].T) @ p["layers"][1]["w"]


def loss(p: dict[str, Any], d: dict[str, Any]) -> Any:
    z = forward(p, d)
    return anp.mean(anp.logaddexp(0, z) - d["y"] * z)


BUILD = functional.autograd(forward, loss, to_model=nested, from_model=flattened)


def test_adam_state_is_reported_in_canonical_names_at_the_policy_dtype() -> None:
    case = case_for(train(adam(1e-3)))
    trainer = BUILD(case)
    assert set(trainer.state()) == {"m.w1", "m.w2", "v.w1", "v.w2", "count"}
    trainer.step()
    state = trainer.state()
    assert float(state["count"]) == 1.0
    assert state["m.w1"].shape == (128, 128) and state["m.w1"].dtype == np.float32
    assert trainer.params()["w1"].dtype == np.float32
    assert trainer.hyperparameters() == {"lr": 1e-3, "b1": 0.9, "b2": 0.999, "eps": 1e-8}


def test_parameters_and_gradients_come_back_in_the_spec_layout() -> None:
    case = case_for(train(momentum(0.1)))
    trainer = BUILD(case)
    np.testing.assert_array_equal(trainer.params()["w1"], case.params["w1"])
    _, grads = trainer.loss_and_grads()
    expected = MODELS.grad(data.widen(case.params), data.widen(case.data))
    np.testing.assert_allclose(grads["w1"], expected["w1"], rtol=1e-3, atol=1e-7)


@pytest.mark.parametrize(("name", "shape"), [
    ("jvp", (16, 1)), ("vjp", {"w1": (128, 128), "w2": (128, 1)}),
    ("hvp", {"w1": (128, 128), "w2": (128, 1)}), ("jacrev", (16, 1, 128))])
def test_transform_results_have_the_protocol_layouts(name: str, shape: Any) -> None:
    case = case_for(transform(name))
    impl = BUILD(case)
    params = data.widen(case.params)
    out = MODELS.forward(np, params, data.widen(case.data))
    probe = data.probe(case.id.workload, case.id.shape, case.task, 0, 0, FP32, params,
                       tuple(out.shape))
    result = impl.apply(probe)
    found = {k: v.shape for k, v in result.items()} if isinstance(result, dict) else result.shape
    assert found == shape


def test_inference_takes_only_the_input_keys() -> None:
    case = case_for(infer())
    outputs = BUILD(case).forward({"x": case.data["x"]})
    assert outputs.shape == (16, 1) and outputs.dtype == np.float32


def test_a_model_layout_needs_both_directions() -> None:
    with pytest.raises(TypeError, match="give both to_model and from_model"):
        functional.jax(forward, loss, to_model=nested)


def test_a_kind_without_its_function_says_which_one() -> None:
    with pytest.raises(TypeError, match=r"functional.autograd\(...\) was given no loss=, which "
                                        r"a Hessian-vector product task needs \(case unit-"):
        functional.autograd(forward)(case_for(transform("hvp")))


@pytest.mark.parametrize(("framework", "name"), [("autograd", "jacfwd"), ("numpy", "jvp")])
def test_a_missing_transform_names_the_unsupported_entry(framework: str, name: str) -> None:
    build = functional.builder(framework, forward, loss)
    with pytest.raises(TypeError, match=re.escape(f"declare ('{framework}', '{name}') in the "
                                                  "spec's unsupported")):
        build(case_for(transform(name), framework))

