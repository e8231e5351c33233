"""The ViT and per-example-gradient workloads: the weight mapping, the pex reference check, and
the correctness gate catching broken implementations of both."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import catalogue, frameworks
from pytest_mlbench.case import Case, CaseId
from pytest_mlbench.harness import check_reference, correctness_gate, seeded_start
from pytest_mlbench.precision import POLICIES

SUITES = Path(__file__).resolve().parents[1] / "suites"
VIT = catalogue.load_module(SUITES / "vit" / "spec.py", "mlbench_suite_vit_spec")
PEX = catalogue.load_module(SUITES / "pex" / "spec.py", "mlbench_suite_pex_spec")


def smoke_start(module: Any, precision: str = "fp64") -> tuple[Any, Any]:
    return seeded_start(module.SPEC, module.SPEC.sizes["smoke"][0], 0, POLICIES[precision])


def make_case(module: Any, framework: str, variant: str, precision: str = "fp32") -> Any:
    """What harness.run_case builds before the gate, for the smoke size."""
    pytest.importorskip(framework)
    workload, shape, policy = module.SPEC, module.SPEC.sizes["smoke"][0], POLICIES[precision]
    adapter = frameworks.load(framework, dict(frameworks.BUILTIN))
    adapter.setup("cpu", policy, 0)
    inputs, params = seeded_start(workload, shape, 0, policy)
    case = Case(CaseId(workload, shape, framework, variant, "cpu", precision), adapter, policy,
                {k: adapter.asarray(v) for k, v in inputs.items()},
                {k: adapter.asarray(v) for k, v in params.items()}, 0)
    return case, inputs, params


def implementation(module: Any, framework: str) -> Any:
    pytest.importorskip(framework)
    return catalogue.implementation(SUITES, module.SPEC, framework)


# -- ViT: the weight mapping --------------------------------------------------------------------

def test_vit_weight_mapping_round_trips():
    _, params = smoke_start(VIT)
    tree = VIT.to_model(params)
    assert len(tree["blocks"]) == VIT.SPEC.sizes["smoke"][0].dims["depth"]
    assert set(tree["blocks"][0]) == set(VIT.BLOCK_KEYS)
    back = VIT.from_model(tree)
    assert back.keys() == params.keys()
    assert all(back[k] is params[k] for k in params)  # a mapping, not a copy


def test_vit_weight_mapping_orders_blocks_by_index():
    _, params = seeded_start(VIT.SPEC, VIT.SPEC.sizes["default"][0], 0, POLICIES["fp64"])
    tree = VIT.to_model(params)
    assert [b["qkv_w"] is params[f"block{i}.qkv_w"] for i, b in enumerate(tree["blocks"])] == \
        [True] * VIT.SPEC.sizes["default"][0].dims["depth"]


@pytest.mark.parametrize("change", ["missing", "unexpected"])
def test_vit_weight_mapping_rejects_other_names(change):
    _, params = smoke_start(VIT)
    if change == "missing":
        del params["block0.ln2_b"]
    else:
        params["block0.extra"] = np.zeros(1)
    with pytest.raises(KeyError, match=change):
        VIT.to_model(params)


@pytest.mark.parametrize("framework", ["jax", "torch", "tensorflow"])
def test_vit_forward_is_a_plain_function_matching_the_reference(framework):
    """forward(params, x) of each framework, on the mapped tree, gives the reference logits in
    float64: what a data-parallel step can call per shard."""
    pytest.importorskip("autograd")
    impl = implementation(VIT, framework)
    case, inputs, params = make_case(VIT, framework, "eager", "fp64")
    dims = case.dims
    logits = impl.forward(VIT.to_model(case.params), case.data["x"], patch=dims["patch"],
                          heads=VIT.num_heads(dims))
    expected = VIT.forward(VIT.to_model(params), inputs["x"], dims["patch"], VIT.num_heads(dims))
    np.testing.assert_allclose(case.adapter.to_numpy(logits), expected, rtol=1e-10, atol=1e-12)


def test_vit_flops_count_every_matmul():
    """Smoke size by hand: B=8, N=4, D=32, M=64, K=10, 48 inputs per patch, 1 block."""
    t = 8 * 4
    forward_block = 2 * t * 32 * 96 + 2 * 2 * 8 * 2 * 4 * 4 * 16 + 2 * t * 32 * 32 \
        + 2 * 2 * t * 32 * 64
    expected = 2 * (2 * t * 48 * 32) + 3 * (forward_block + 2 * 8 * 32 * 10)
    assert VIT.SPEC.flops_per_step(VIT.SPEC.sizes["smoke"][0].dims) == expected


def test_broken_attention_scale_fails_the_gate(monkeypatch):
    """Scaling scores by 1/d_head instead of 1/sqrt(d_head) must not get past the gate."""
    import torch

    impl = implementation(VIT, "torch")

    def attention(a: Any, blk: dict[str, Any], heads: int) -> Any:
        b, n, d = a.shape
        qkv = (a @ blk["qkv_w"] + blk["qkv_b"]).reshape(b, n, 3, heads, d // heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        weights = torch.softmax(q @ k.transpose(-1, -2) / (d // heads), dim=-1)
        return (weights @ v).transpose(1, 2).reshape(b, n, d) @ blk["proj_w"] + blk["proj_b"]

    monkeypatch.setattr(impl, "attention", attention)
    case, inputs, params = make_case(VIT, "torch", "eager")
    with pytest.raises(AssertionError, match="loss at the start|gradient of"):
        correctness_gate(case, impl.build(case), inputs, params, "vit torch eager")


def test_vit_torch_eager_passes_the_gate():
    """The control for the test above: the same construction, unbroken, passes."""
    impl = implementation(VIT, "torch")
    case, inputs, params = make_case(VIT, "torch", "eager")
    correctness_gate(case, impl.build(case), inputs, params, "vit torch eager")


# -- per-example gradients ----------------------------------------------------------------------

@pytest.mark.parametrize("size", ["smoke", "default", "paper"])
def test_pex_clipping_is_active_for_some_examples_only(size):
    shape = PEX.SPEC.sizes[size][0]
    inputs, params = seeded_start(PEX.SPEC, shape, 0, POLICIES["fp64"])
    h, da, dz = PEX._backward(params, inputs)
    sq = [np.sum(v * v, axis=1) for v in (inputs["x"], da, h, dz)]
    norms = np.sqrt(sq[0] * sq[1] + sq[1] + sq[2] * sq[3] + sq[3])
    clipped = np.mean(norms > PEX.clip_norm(shape.dims["in"], shape.dims["hidden"]))
    assert 0.1 <= clipped <= 0.9, f"{size}: {clipped:.0%} of the examples are clipped"


def test_pex_vectorised_reference_matches_the_per_example_definition():
    inputs, params = smoke_start(PEX)
    c = PEX.clip_factors(params, inputs)
    n = len(inputs["x"])
    expected = {k: sum(c[i] * PEX.example_grad(params, inputs, i)[k] for i in range(n)) / n
                for k in params}
    got = PEX.grad(params, inputs)
    for k in params:
        np.testing.assert_allclose(got[k], expected[k], rtol=1e-12, atol=1e-14)


def unclipped(p: Any, d: Any) -> dict[str, np.ndarray]:
    """The plain mean of per-example gradients: the gradient of the mean loss."""
    h, da, dz = PEX._backward(p, d)
    n = len(d["x"])
    return {"w1": d["x"].T @ da / n, "b1": da.mean(0), "w2": h.T @ dz / n, "b2": dz.mean(0)}


def test_pex_reference_check_catches_an_unclipped_gradient():
    shape = PEX.SPEC.sizes["smoke"][0]
    check_reference(PEX.SPEC, shape, 0)  # the spec as written passes
    with pytest.raises(AssertionError, match="clipped mean"):
        check_reference(replace(PEX.SPEC, grad=unclipped), shape, 0)


def test_pex_reference_checks_are_needed():
    """Without them the generic check compares the clipped mean with the loss's gradient,
    and fails: the field is what makes the reference checkable."""
    with pytest.raises(AssertionError, match="central differences"):
        check_reference(replace(PEX.SPEC, reference_checks=None), PEX.SPEC.sizes["smoke"][0], 0)


def test_pex_reference_check_catches_a_wrong_example_gradient(monkeypatch):
    real = PEX.example_grad
    monkeypatch.setattr(PEX, "example_grad",
                        lambda p, d, i: {**real(p, d, i), "b2": 0.5 * real(p, d, i)["b2"]})
    with pytest.raises(AssertionError, match="example 0"):
        check_reference(PEX.SPEC, PEX.SPEC.sizes["smoke"][0], 0)


def test_pex_loop_without_clipping_fails_the_gate():
    impl = implementation(PEX, "numpy")
    case, inputs, params = make_case(PEX, "numpy", "eager")
    trainer = impl.build(case)
    trainer.clip = math.inf
    with pytest.raises(AssertionError, match="gradient of"):
        correctness_gate(case, trainer, inputs, params, "pex numpy unclipped")


def test_pex_vmap_clipping_the_mean_fails_the_gate(monkeypatch):
    """Clipping the averaged gradient instead of each example's is a different update."""
    import torch

    impl = implementation(PEX, "torch")

    def clip_the_mean(g: dict[str, Any], clip: float) -> dict[str, Any]:
        mean = {k: v.mean(dim=0) for k, v in g.items()}
        norm = torch.sqrt(sum(v.pow(2).sum() for v in mean.values()))
        return {k: v * torch.clamp(clip / norm, max=1.0) for k, v in mean.items()}

    monkeypatch.setattr(impl, "clip_and_average", clip_the_mean)
    case, inputs, params = make_case(PEX, "torch", "eager")
    with pytest.raises(AssertionError, match="gradient of"):
        correctness_gate(case, impl.build(case), inputs, params, "pex torch clip-the-mean")


def test_vit_without_autograd_skips_naming_the_extra(monkeypatch):
    """autograd is an optional extra: without it the ViT reference skips, it does not error."""
    monkeypatch.setattr(VIT, "autograd", None)
    with pytest.raises(pytest.skip.Exception, match=r"pytest-mlbench\[autograd\]"):
        check_reference(VIT.SPEC, VIT.SPEC.sizes["smoke"][0], 0)
