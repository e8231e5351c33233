"""Idioms as variants (pytest_mlbench/variants.py): ``mode+idiom`` names, collection choosing
them by mode, and the functional builder building the idiom the variant names."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_mlbench import sgd, train
from pytest_mlbench.builders import functional
from pytest_mlbench.options import build_settings, option_table
from pytest_mlbench.parametrize import enumerate_cases
from pytest_mlbench.workloads import catalogue

MODELS = catalogue.load_suite_file(Path(__file__).resolve().parents[1] / "kinds" / "models.py")


def names(variants_option: str) -> list[str]:
    spec = dataclasses.replace(
        MODELS.mlp("idi", (train(sgd(0.1)),), jax=("jit",)),
        implementations={"torch": ("eager", "jit", "eager+sdpa", "jit+sdpa")})
    settings = build_settings({"variants": variants_option, "frameworks": "torch",
                               "workers": "1"}, option_table())
    return [c.impl for c in enumerate_cases((spec,), settings, {})]


def test_a_mode_selects_its_idioms_too_in_the_sessions_order() -> None:
    assert names("jit") == ["torch-jit", "torch-jit+sdpa"]
    assert names("eager") == ["torch-eager", "torch-eager+sdpa"]
    assert names("jit,eager") == ["torch-jit", "torch-jit+sdpa", "torch-eager",
                                  "torch-eager+sdpa"]


def test_the_builder_builds_the_idiom_the_variant_names_and_refuses_an_unknown_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    built = []
    plain, fused = (lambda p, d: None), (lambda p, d: None)
    build = functional.builder("torch", plain, plain, idioms={"sdpa": (fused, fused)})
    fake = SimpleNamespace(build=lambda model, case: built.append(model.forward) or model)
    monkeypatch.setattr(functional.importlib, "import_module", lambda name: fake)
    build(SimpleNamespace(idiom="", variant="jit"))
    build(SimpleNamespace(idiom="sdpa", variant="jit+sdpa"))
    assert built == [plain, fused]
    with pytest.raises(TypeError, match=r"^functional.torch: variant 'jit\+scan' names idiom "
                                        r"'scan', which this implementation does not have \(its "
                                        r"idioms: 'sdpa'\)"):
        build(SimpleNamespace(idiom="scan", variant="jit+scan"))


def test_an_idiom_may_lay_the_parameters_out_its_own_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """(forward, loss, to_model, from_model): cnn's channels-last kernels; an idiom of two
    keeps the plain model's layout."""
    built = []
    fn = lambda p, d: None  # noqa: E731
    plain_in, plain_out, cl_in, cl_out = (lambda t: t), (lambda t: t), (lambda t: t), (lambda t: t)
    build = functional.builder("torch", fn, fn, to_model=plain_in, from_model=plain_out,
                               idioms={"cl": (fn, fn, cl_in, cl_out), "two": (fn, fn)})
    fake = SimpleNamespace(build=lambda model, case: built.append(model) or model)
    monkeypatch.setattr(functional.importlib, "import_module", lambda name: fake)
    for idiom in ("", "cl", "two"):
        build(SimpleNamespace(idiom=idiom, variant="jit" + (f"+{idiom}" if idiom else "")))
    assert [(m.to_model, m.from_model) for m in built] == [
        (plain_in, plain_out), (cl_in, cl_out), (plain_in, plain_out)]


def test_a_step_idiom_builds_the_plain_model_in_every_jax_implementation_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``jit+donate`` is the builder's (STEP_IDIOMS): JAX builds its plain model for it, which
    the JAX builder compiles donating; another framework has no such idiom."""
    built = []
    plain = lambda p, d: None  # noqa: E731
    fake = SimpleNamespace(build=lambda model, case: built.append(model.forward) or model)
    monkeypatch.setattr(functional.importlib, "import_module", lambda name: fake)
    functional.builder("jax", plain, plain)(SimpleNamespace(idiom="donate", variant="jit+donate"))
    assert built == [plain]
    with pytest.raises(TypeError, match=r"names idiom 'donate', which this implementation does "
                                        r"not have \(its idioms: 'sdpa'\)"):
        functional.builder("torch", plain, plain, idioms={"sdpa": (plain, plain)})(
            SimpleNamespace(idiom="donate", variant="jit+donate"))


def test_an_adapter_without_donation_refuses_it_in_one_line() -> None:
    from pytest_mlbench.errors import Unsupported
    from pytest_mlbench.frameworks.numpy_ import NumpyAdapter

    with pytest.raises(Unsupported, match=r"^numpy has no buffer donation \(JAX's "
                                          r"donate_argnums\)$"):
        NumpyAdapter().compile(lambda x: x, "eager", donate=(0,))
    assert NumpyAdapter().compile(lambda x: x + 1, "eager")(1) == 2
