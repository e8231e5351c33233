"""The gpu size (GPT-2 124M, ViT-B/16) without a GPU: its shapes at a stand-in (the gpu dims
with one layer and a short context: GPT-2's width and heads of 64, cheap), its FLOP counts
against the 6 P + 12 L D T rule of PaLM and nanoGPT, the skip on a CPU, and the float32
reference's cross-check. Each check is also shown failing on a broken input."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import frameworks, parametrize
from pytest_mlbench.checking import reference as reference_module
from pytest_mlbench.checking.reference import Reference
from pytest_mlbench.errors import Unavailable
from pytest_mlbench.options import build_settings, option_table
from pytest_mlbench.parametrize import case_params, enumerate_cases
from pytest_mlbench.workloads import catalogue
from pytest_mlbench.workloads.spec import Shape
from tests.gate import SUITES

GPT = catalogue.load_suite_file(SUITES / "gpt" / "spec.py")
VIT = catalogue.load_suite_file(SUITES / "vit" / "spec.py")
Dims = Mapping[str, int]


def gpu(module: Any) -> Shape:
    return module.SPEC.sizes["gpu"][0]


def stand_in(module: Any) -> dict[str, int]:
    """The gpu dims, one layer, a tiny batch and context: the width and heads kept (vit's MLP
    narrowed too: heads do not depend on it)."""
    dims = dict(gpu(module).dims)
    if module is GPT:
        return dims | {"batch": 2, "seq": 16, "vocab": 64, "layers": 1}
    return dims | {"batch": 2, "image": 32, "depth": 1, "classes": 10, "mlp": 64}


def start(module: Any, dims: Dims) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The seeded data and parameters at ``dims``, made once (the tests read, never write)."""
    return _start(module.__name__, tuple(sorted(dims.items())))


@functools.cache
def _start(name: str, dims: tuple[tuple[str, int], ...]) -> tuple[Any, Any]:
    module, rng = (GPT if name == GPT.__name__ else VIT), np.random.default_rng(0)
    data = module.SPEC.make_data(rng, dict(dims))
    return data, module.SPEC.make_params(rng, dict(dims))


@pytest.fixture(autouse=True, scope="module")
def _forget_starts() -> Any:
    yield
    _start.cache_clear()  # 75 MB of stand-ins, not kept for the rest of the session


# -- the shapes: GPT-2 small and ViT-B/16 -------------------------------------------------------

def test_the_gpu_sizes_are_gpt2_small_and_vit_b16_in_heads_of_64() -> None:
    g, v = gpu(GPT).dims, gpu(VIT).dims
    assert dict(g) == {"batch": 8, "seq": 1024, "vocab": 50304, "dim": 768, "layers": 12}
    assert dict(v) == {"batch": 64, "image": 224, "patch": 16, "channels": 3, "dim": 768,
                       "depth": 12, "mlp": 3072, "classes": 1000}
    assert (GPT.heads(768), GPT.head_dim(768), VIT.num_heads(v)) == (12, 64, 12)
    # the CPU sizes keep their heads (32 and 16 wide): their figures stay comparable
    assert GPT.heads(384) == 12 and VIT.num_heads(VIT.SPEC.sizes["paper"][0].dims) == 12
    for shape in (gpu(GPT), gpu(VIT)):
        assert shape.devices == ("gpu",) and shape.reference == "float32"


def gpt_parameters(dims: Dims) -> int:
    """GPT-2 small's count from the spec's own make_params at a one-layer stand-in: a block's
    parameters (the stand-in's less its embeddings and final LayerNorm) times the layers."""
    small = stand_in(GPT)
    _, params = start(GPT, small)
    block = sum(a.size for k, a in params.items() if k.startswith("h0."))
    assert block == 12 * 768 ** 2 + 10 * 768  # q|k|v, proj, MLP; their biases, LayerNorms
    return dims["layers"] * block + (dims["vocab"] + dims["seq"] + 2) * dims["dim"]


def test_gpt_at_the_stand_in_is_gpt2_wide_and_its_reference_runs() -> None:
    dims = stand_in(GPT)
    data, params = start(GPT, dims)
    assert data["tokens"].shape == (2, 16) and data["tokens"].dtype == np.int32
    assert params["wte"].shape == (64, 768) and params["h0.attn_w"].shape == (768, 3 * 768)
    logits = GPT.forward(np, params, data)
    assert logits.shape == (2, 16, 64)
    loss = GPT.objective(np, logits, data)
    assert abs(loss - math.log(64)) < 0.1  # GPT-2's init: near uniform over the vocabulary
    # 124M: GPT-2 small less the q|k|v bias the spec leaves out (nanoGPT's bias=False)
    assert gpt_parameters(gpu(GPT).dims) == 124_448_256


def test_vit_at_the_stand_in_is_vit_b16_wide_and_both_writings_agree() -> None:
    """The hand-derived reference (autograd.numpy) and the array-API one the gpu size's
    float32 oracles differentiate compute the same loss at ViT-B's width and patch."""
    pytest.importorskip("autograd")
    dims = stand_in(VIT)
    data, params = start(VIT, dims)
    assert data["x"].shape == (2, 32, 32, 3) and params["patch_w"].shape == (16 * 16 * 3, 768)
    assert VIT.config(params["patch_w"].shape, data["x"].shape) == (16, 12)
    logits = VIT.api_forward(np, params, data)
    assert logits.shape == (2, 10)
    np.testing.assert_allclose(VIT.api_objective(np, logits, data), VIT.loss(params, data),
                               rtol=1e-12)


# -- FLOPs: the PaLM / nanoGPT count ------------------------------------------------------------

def palm_gpt(dims: Dims) -> int:
    """6 P + 12 L D T a token (PaLM appendix B, nanoGPT's estimate_mfu), P the matmul
    parameters: L blocks of 12 D^2 and the tied head's V D."""
    d, layers, t = dims["dim"], dims["layers"], dims["seq"]
    matmul = layers * 12 * d * d + dims["vocab"] * d
    return dims["batch"] * t * (6 * matmul + 12 * layers * d * t)


def palm_vit(dims: Dims) -> int:
    """The same rule for the blocks (P = L (4 D^2 + 2 D M)) and the attention over N patches;
    the patch embedding 4 P^2 C D a token (no gradient of the images), the head 6 D K an
    image (it sees the pooled token)."""
    b, d, m, layers = dims["batch"], dims["dim"], dims["mlp"], dims["depth"]
    n = VIT.num_patches(dims)
    blocks = layers * (4 * d * d + 2 * d * m)
    flat = dims["patch"] ** 2 * dims["channels"]
    return b * n * (6 * blocks + 12 * layers * n * d + 4 * flat * d) + 6 * b * d * dims["classes"]


def assert_counts(flops: Callable[[Dims], int], rule: Callable[[Dims], int], dims: Dims) -> None:
    assert flops(dims) == rule(dims), f"{flops(dims):,} FLOPs a step, the rule {rule(dims):,}"


@pytest.mark.parametrize("module, rule", [(GPT, palm_gpt), (VIT, palm_vit)], ids=["gpt", "vit"])
def test_the_flop_counts_are_the_palm_rule_term_for_term(module: Any, rule: Any) -> None:
    for dims in (gpu(module).dims, stand_in(module)):
        assert_counts(module.SPEC.flops_per_step, rule, dims)
    # broken: a count without the backward pass, or without the attention
    with pytest.raises(AssertionError, match="the rule"):
        assert_counts(lambda d: module.SPEC.flops_per_step(d) // 3, rule, gpu(module).dims)
    with pytest.raises(AssertionError, match="the rule"):
        assert_counts(module.SPEC.flops_per_step, lambda d: rule(d) + 1, gpu(module).dims)


def test_nanogpts_count_with_every_parameter_is_within_a_thousandth() -> None:
    """nanoGPT's N counts biases and LayerNorms too (all but the positions): 0.05% more."""
    dims = gpu(GPT).dims
    n = gpt_parameters(dims) - dims["seq"] * dims["dim"]
    nanogpt = dims["batch"] * dims["seq"] * (
        6 * n + 12 * dims["layers"] * dims["dim"] * dims["seq"])
    ours = GPT.SPEC.flops_per_step(dims)
    assert ours == 7_001_333_563_392 and 0 < nanogpt / ours - 1 < 1e-3


def vit_block(d: int, m: int) -> int:
    """A block's parameters: q|k|v and proj with biases, the MLP's two layers, two LayerNorms."""
    return 4 * d * d + 2 * d * m + 9 * d + m


def test_the_vit_count_is_the_rules_less_its_per_token_head_and_patch_gradient() -> None:
    """The plain 6 P T rule over every parameter and token charges ViT-B/16 1.4% more."""
    small = stand_in(VIT)
    _, params = start(VIT, small)
    assert sum(a.size for k, a in params.items() if k.startswith("block0.")) == vit_block(
        small["dim"], small["mlp"])
    dims = gpu(VIT).dims
    d, n, flat = dims["dim"], VIT.num_patches(dims), dims["patch"] ** 2 * dims["channels"]
    every = dims["depth"] * vit_block(d, dims["mlp"]) + (flat + 1 + n + 2) * d \
        + (d + 1) * dims["classes"]
    assert every == 86_566_120  # ViT-B/16's 86.6M (less its class token)
    plain = dims["batch"] * n * (6 * every + 12 * dims["depth"] * n * d)
    assert 0.013 < plain / VIT.SPEC.flops_per_step(dims) - 1 < 0.015


# -- selection: a GPU size on a CPU skips, naming how to force it --------------------------------

def gpu_cases(**raw: str) -> list[Any]:
    # the modes every torch and JAX install has (torch's xla needs torch_xla: its own job)
    settings = build_settings({"size": "gpu", "frameworks": "torch,jax", "workers": "1",
                               "variants": "eager,jit", **raw},
                              option_table())
    workloads = (catalogue.load_workload(SUITES / "gpt"), catalogue.load_workload(SUITES / "mlp"))
    cases = list(enumerate_cases(workloads, settings, frameworks.BUILTIN))
    return case_params(cases, catalogue.Catalogue(SUITES, workloads), frameworks.BUILTIN,
                       settings)


def skips(params: list[Any]) -> set[str]:
    return {mark.kwargs["reason"] for p in params for mark in p.marks if mark.name == "skip"}


def test_the_gpu_size_on_a_cpu_skips_saying_how_to_run_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    params = gpu_cases(precision="amp")
    # mlp has no gpu size: no case; gpt's twelve torch and JAX variants, each skipped
    assert len(params) == 12 and all(p.id.startswith("gpt-124m-") for p in params)
    assert skips(params) == {
        "gpt's gpu size is made for a gpu, not this case's cpu (a step takes minutes there); "
        "run it with --mlbench-device=gpu, or here anyway with --mlbench-force-size"}
    assert skips(gpu_cases(precision="amp", **{"force-size": "yes"})) == set()
    # asked for on a GPU this machine does not have: skipped before any of its work
    monkeypatch.setattr(parametrize, "_gpus", lambda: 0)
    assert skips(gpu_cases(precision="amp", device="gpu")) == {
        "gpt's gpu size needs a gpu and this machine shows none (nvidia-smi lists no GPU); run "
        "it where one is, or here anyway with --mlbench-force-size"}
    monkeypatch.setattr(parametrize, "_gpus", lambda: 1)
    assert skips(gpu_cases(precision="amp", device="gpu")) == set()


def test_the_float32_reference_refuses_float32_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parametrize, "_gpus", lambda: 1)
    found = skips(gpu_cases(precision="fp32", device="gpu"))
    assert len(found) == 1 and "checked against a float32 reference" in next(iter(found))
    assert skips(gpu_cases(precision="bf16,amp16,tf32", device="gpu")) == set()


def test_discovery_refuses_a_size_device_or_reference_it_does_not_know() -> None:
    spec = GPT.SPEC
    shape = gpu(GPT)
    assert spec.problems() == []
    bad = dataclasses.replace(spec, sizes={**spec.sizes, "huge": (shape,)})
    assert bad.problems() == ["sizes['huge'] is no size profile (smoke, default, paper, gpu): "
                              "--mlbench-size could never pick it"]
    typo = dataclasses.replace(shape, devices=("cuda",), reference="float16")
    found = dataclasses.replace(spec, sizes={**spec.sizes, "gpu": (typo,)}).problems()
    assert found == [
        "sizes['gpu'] shape 124m: devices=('cuda',) (tuple) must be a tuple of cpu, gpu, tpu "
        "(empty: every device)",
        "sizes['gpu'] shape 124m: reference='float16' must be one of float64, float32"]
    no_model = dataclasses.replace(spec, forward=None, objective=None, loss=lambda p, d: 0.0)
    assert any("a float32 reference is the autodiff oracles' gradient" in f
               for f in no_model.problems())


# -- the float32 reference: two oracles on the device, each checking the other ------------------

class Oracles:
    """A stand-in OracleService: ``value_and_grad`` per backend, calls recorded."""

    def __init__(self, answers: dict[str, tuple[float, dict[str, np.ndarray]]]) -> None:
        self.answers, self.calls = answers, []
        self.backends = list(answers)

    def call(self, command: str, payload: Any, backend: str | None = None, device: str = "cpu",
             dtype: str = "float64") -> Any:
        name = backend or self.backends[0]
        self.calls.append((command, name, device, dtype))
        return self.answers[name]


def float32_reference(oracle: Any) -> Reference:
    shape = Shape(stand_in(GPT), reference="float32")
    return Reference(GPT.SPEC, shape, 0, str(SUITES / "gpt"), oracle, device="gpu")


def test_the_float32_reference_is_two_oracles_on_the_device_that_agree() -> None:
    g = {"w": np.array([1.0, -2.0, 3.0])}
    oracle = Oracles({"jax": (2.0, g), "torch": (2.0 * (1 + 1e-5), {"w": g["w"] * (1 + 1e-5)})})
    ref = float32_reference(oracle)
    ref.verify(GPT.SPEC.all_tasks[0], {"x": np.zeros(2)}, {"w": np.zeros(3)}, None)
    assert ref.loss_and_grad({"w": np.zeros(3)}, {"x": np.zeros(2)})[0] == 2.0  # cached
    assert oracle.calls == [("value_and_grad", "jax", "gpu", "float32"),
                            ("value_and_grad", "torch", "gpu", "float32")]


def test_the_float32_reference_fails_when_its_oracles_disagree_or_one_is_missing() -> None:
    g = {"w": np.array([1.0, -2.0, 3.0])}
    off = Oracles({"jax": (2.0, g), "torch": (2.0, {"w": g["w"] * (1 + 1e-3)})})
    with pytest.raises(AssertionError, match=r"jax and torch float32 oracles disagree on the "
                                             r"gradient \(w\)"):
        float32_reference(off).verify(GPT.SPEC.all_tasks[0], {}, {"w": np.zeros(3)}, None)
    with pytest.raises(Unavailable, match="install both jax and torch"):
        float32_reference(Oracles({"jax": (2.0, g)})).verify(
            GPT.SPEC.all_tasks[0], {}, {"w": np.zeros(3)}, None)


def test_the_value_cache_keeps_to_its_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPT-2 gradient is a gigabyte: the cache holds CACHE_BYTES of them, oldest out."""
    monkeypatch.setattr(reference_module, "CACHE_BYTES", 3 * 8 * 1000)
    ref = float32_reference(Oracles({}))
    for i in range(5):
        ref._cached(("grad", i), lambda: (0.0, {"w": np.zeros(1000)}))
    assert [key[1] for key in ref._cache] == [2, 3, 4]


# -- the implementations at GPT-2's heads of 64 ------------------------------------------------

def test_torch_gpt_writes_heads_of_64_as_the_reference_does() -> None:
    """Written out and through SDPA, the torch GPT at the stand-in computes the reference's
    logits (its layer-library variant takes the same spec.heads: docs/GPU.md's CPU check
    runs every variant); the CPU sizes' 24 heads of 32 at this width would not."""
    torch = pytest.importorskip("torch")
    impl = catalogue.load_suite_file(SUITES / "gpt" / "impl_torch.py")
    data, params = start(GPT, stand_in(GPT))
    expected = GPT.forward(np, params, data)
    p = {k: torch.from_numpy(v) for k, v in params.items()}
    d = {k: torch.from_numpy(v) for k, v in data.items()}
    for name, forward in {"written out": impl.forward, "sdpa": impl.model(impl.sdpa)[0]}.items():
        np.testing.assert_allclose(forward(p, d).detach().numpy(), expected, rtol=1e-9,
                                   atol=1e-12, err_msg=name)
    a = torch.from_numpy(np.random.default_rng(1).standard_normal((1, 16, 768)))
    wrong, right = (impl.attention(a, p["h0.attn_w"], heads) for heads in (24, GPT.heads(768)))
    assert not torch.allclose(wrong, right)


def test_the_campaign_computes_a_float32_reference_on_the_cases_device() -> None:
    """The campaign's reference of a float32 shape runs where its cases run; any other
    shape's stays the parent's (the CPU oracle), whatever the cases' device."""
    from pytest_mlbench.checking.oracle_client import OracleService
    from pytest_mlbench.measuring.campaign import Campaign
    from pytest_mlbench.measuring.plan import Lane, Plan, Side
    from pytest_mlbench.workloads.case import CaseId

    small = {"batch": 2, "seq": 8, "vocab": 16, "dim": 64, "layers": 1}
    shapes = (Shape(small, "f32", reference="float32"), Shape(small, "f64"))
    workload = dataclasses.replace(GPT.SPEC, sizes={"smoke": shapes})
    cases = tuple(CaseId(workload, shape, workload.all_tasks[0], "torch", "jit+sdpa", "gpu",
                         "amp") for shape in shapes)
    plan = Plan(timing=False, processes=1, threads=1, affinity="off", seed=0, size="smoke",
                max_time=1.0, min_rounds=5)
    lane = Lane(Side(), catalogue.Catalogue(SUITES, (workload,)), cases)
    campaign = Campaign([lane], plan, frameworks.BUILTIN, OracleService())
    devices = [campaign._context(state).reference.device for state in campaign.states.values()]
    assert devices == ["gpu", "cpu"]
