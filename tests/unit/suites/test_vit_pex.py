"""The ViT and per-example-gradient workloads: the weight mapping, the pex reference checks, and
the checks before timing catching broken implementations of both (tests/gate.py)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from pytest_mlbench.checking.oracle_client import OracleService
from pytest_mlbench.checking.reference import Reference
from pytest_mlbench.precision import POLICIES
from pytest_mlbench.workloads import catalogue, data
from tests.gate import SUITES, check

VIT = catalogue.load_suite_file(SUITES / "vit" / "spec.py")
PEX = catalogue.load_suite_file(SUITES / "pex" / "spec.py")


def smoke_start(module: Any, size: str = "smoke") -> tuple[Any, Any]:
    return data.seeded_start(module.SPEC, module.SPEC.sizes[size][0], 0, POLICIES["fp64"])


def verify_reference(spec: Any) -> None:
    """What test_reference runs: the reference against finite differences."""
    shape = spec.sizes["smoke"][0]
    inputs, params = data.seeded_start(spec, shape, 0, POLICIES["fp64"])
    oracle = OracleService()
    try:
        Reference(spec, shape, 0, str(SUITES / "pex"), oracle).verify(
            spec.all_tasks[0], inputs, params, None)
    finally:
        oracle.close()


def implementation(module: Any, framework: str) -> Any:
    pytest.importorskip(framework)
    return catalogue.implementation(SUITES, module.SPEC, framework)


# -- ViT: the weight mapping --------------------------------------------------------------------

def test_vit_weight_mapping_round_trips() -> None:
    _, params = smoke_start(VIT)
    tree = VIT.to_model(params)
    assert len(tree["blocks"]) == VIT.SPEC.sizes["smoke"][0].dims["depth"]
    assert set(tree["blocks"][0]) == set(VIT.BLOCK_KEYS)
    back = VIT.from_model(tree)
    assert back.keys() == params.keys()
    assert all(back[k] is params[k] for k in params)  # a mapping, not a copy


def test_vit_weight_mapping_orders_blocks_by_index() -> None:
    _, params = smoke_start(VIT, "default")
    tree = VIT.to_model(params)
    depth = VIT.SPEC.sizes["default"][0].dims["depth"]
    assert [b["qkv_w"] is params[VIT.block_key(i, "qkv_w")]
            for i, b in enumerate(tree["blocks"])] == [True] * depth


@pytest.mark.parametrize("change", ["missing", "unexpected"])
def test_vit_weight_mapping_rejects_other_names(change: str) -> None:
    _, params = smoke_start(VIT)
    if change == "missing":
        del params[VIT.block_key(0, "ln2_b")]
    else:
        params[VIT.block_key(0, "extra")] = np.zeros(1)
    with pytest.raises(KeyError, match=change):
        VIT.to_model(params)


def test_vit_flops_count_every_matmul() -> None:
    """Smoke size by hand: B=8, N=4, D=32, M=64, K=10, 48 inputs per patch, 1 block."""
    t = 8 * 4
    forward_block = 2 * t * 32 * 96 + 2 * 2 * 8 * 2 * 4 * 4 * 16 + 2 * t * 32 * 32 \
        + 2 * 2 * t * 32 * 64
    expected = 2 * (2 * t * 48 * 32) + 3 * (forward_block + 2 * 8 * 32 * 10)
    assert VIT.SPEC.flops_per_step(VIT.SPEC.sizes["smoke"][0].dims) == expected


def test_broken_attention_scale_fails_the_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scores scaled by 1/d_head instead of 1/sqrt(d_head) must not get past the checks."""
    import torch

    impl = implementation(VIT, "torch")

    def attention(a: Any, blk: dict[str, Any], heads: int, attend: Any = None) -> Any:
        b, n, d = a.shape
        qkv = (a @ blk["qkv_w"] + blk["qkv_b"]).reshape(b, n, 3, heads, d // heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        weights = torch.softmax(q @ k.transpose(-1, -2) / (d // heads), dim=-1)
        return (weights @ v).transpose(1, 2).reshape(b, n, d) @ blk["proj_w"] + blk["proj_b"]

    monkeypatch.setattr(impl, "attention", attention)
    with pytest.raises(AssertionError, match=r"torch eager \(vit-torch-eager-cpu-fp32\) (loss at "
                                             r"the start|gradient of)"):
        check("vit", "torch")


def test_vit_torch_eager_passes_the_checks() -> None:
    """The control for the test above: the same construction, unbroken, passes."""
    implementation(VIT, "torch")
    check("vit", "torch")


# -- per-example gradients ----------------------------------------------------------------------

@pytest.mark.parametrize("size", ["smoke", "default", "paper"])
def test_pex_clipping_is_active_for_some_examples_only(size: str) -> None:
    shape = PEX.SPEC.sizes[size][0]
    inputs, params = data.seeded_start(PEX.SPEC, shape, 0, POLICIES["fp64"])
    clipped = np.mean(PEX.clip_factors(params, inputs) < 1.0)
    assert 0.1 <= clipped <= 0.9, f"{size}: {clipped:.0%} of the examples are clipped"


def test_pex_vectorised_reference_matches_the_per_example_definition() -> None:
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
    n = len(d["x"])
    grads = [PEX.example_grad(p, d, i) for i in range(n)]
    return {k: sum(g[k] for g in grads) / n for k in p}


def test_pex_reference_check_catches_an_unclipped_gradient() -> None:
    verify_reference(PEX.SPEC)  # the spec as written passes
    with pytest.raises(AssertionError, match="clipped mean"):
        verify_reference(replace(PEX.SPEC, grad=unclipped))


def test_pex_reference_checks_are_needed() -> None:
    """Without them the generic check compares the clipped mean with the loss's gradient,
    and fails: the field is what makes the reference checkable."""
    with pytest.raises(AssertionError, match="central differences"):
        verify_reference(replace(PEX.SPEC, reference_checks=None))


def test_pex_reference_check_catches_a_wrong_example_gradient(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = PEX.example_grad
    monkeypatch.setattr(PEX, "example_grad",
                        lambda p, d, i: {**real(p, d, i), "b2": 0.5 * real(p, d, i)["b2"]})
    with pytest.raises(AssertionError, match="example 0"):
        verify_reference(PEX.SPEC)


def test_pex_loop_without_clipping_fails_the_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    impl = implementation(PEX, "numpy")
    real = impl.clipped_mean
    monkeypatch.setattr(impl, "clipped_mean", lambda p, x, y, clip: real(p, x, y, math.inf))
    with pytest.raises(AssertionError, match=r"numpy eager \(pex-numpy-eager-cpu-fp32\) gradient "
                                             r"of"):
        check("pex", "numpy")


def test_pex_vmap_clipping_the_mean_fails_the_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clipping the averaged gradient instead of each example's is a different update."""
    import torch

    impl = implementation(PEX, "torch")

    def clip_the_mean(g: dict[str, Any], clip: float) -> dict[str, Any]:
        mean = {k: v.mean(dim=0) for k, v in g.items()}
        norm = torch.sqrt(sum(v.pow(2).sum() for v in mean.values()))
        return {k: v * torch.clamp(clip / norm, max=1.0) for k, v in mean.items()}

    monkeypatch.setattr(impl, "clip_and_average", clip_the_mean)
    with pytest.raises(AssertionError, match=r"torch eager \(pex-torch-eager-cpu-fp32\) gradient "
                                             r"of"):
        check("pex", "torch")


def test_vit_without_autograd_skips_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """autograd is an optional extra: without it the ViT reference skips, it does not error."""
    monkeypatch.setattr(VIT, "autograd", None)
    inputs, params = smoke_start(VIT)
    with pytest.raises(pytest.skip.Exception, match=r"pytest-mlbench\[autograd\]"):
        VIT.SPEC.grad(params, inputs)
