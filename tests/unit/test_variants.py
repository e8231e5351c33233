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
