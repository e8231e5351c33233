"""Discovery of a workload that reuses another's implementations (``implementations_from``),
and the data-parallel loss derived from an implementation's functional loss."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_mlbench.workloads import catalogue

SPEC = """
import numpy as np
from pytest_mlbench import Shape, Workload

SPEC = Workload(
    name={name!r}, summary="least squares", learning_rate=0.1,
    sizes={{s: (Shape({{"n": 8}}),) for s in ("smoke", "default", "paper")}},
    make_data=lambda rng, d: {{"x": rng.standard_normal((d["n"], 3)),
                               "y": rng.standard_normal((d["n"], 1))}},
    make_params=lambda rng, d: {{"w": rng.standard_normal((3, 1))}},
    loss=lambda p, d: 0.0, grad=lambda p, d: {{"w": 0 * p["w"]}},
    flops_per_step=lambda d: 1, implementations={impls}, implementations_from={source!r},
)
"""
FRAMEWORKS = ("numpy", "jax")


def folder(root: Path, name: str, impls: dict[str, tuple[str, ...]], source: object = None,
           files: tuple[str, ...] = ()) -> Path:
    path = root / name
    path.mkdir()
    (path / "spec.py").write_text(SPEC.format(name=name, impls=impls, source=source))
    for framework in files:
        (path / f"impl_{framework}.py").write_text("def build(case):\n    return None\n")
    return path


def rules(root: Path) -> list[str]:
    return [p.rule for p in catalogue.discover(root, FRAMEWORKS).problems]


def test_a_workload_runs_the_implementations_of_the_folder_it_names(tmp_path: Path) -> None:
    folder(tmp_path, "base", {"numpy": ("eager",), "jax": ("jit",)}, files=("numpy", "jax"))
    folder(tmp_path, "other", {"numpy": ("eager",), "jax": ("jit",)}, source="base",
           files=("numpy",))
    found = catalogue.discover(tmp_path, FRAMEWORKS)
    assert not found.problems
    other = next(w for w in found.workloads if w.name == "other")
    assert catalogue.implementation_path(tmp_path, other, "jax") == tmp_path / "base/impl_jax.py"
    # a file of its own wins: what really differs stays in the folder
    assert catalogue.implementation_path(tmp_path, other, "numpy") == \
        tmp_path / "other/impl_numpy.py"


@pytest.mark.parametrize(("source", "rule"), [
    ("nowhere", "implementations_from='nowhere' names no workload folder beside this one"),
    ("other", "implementations_from='other' names this folder itself"),
    ("base", "implementations_from='base' serves no framework"),
    (3, "implementations_from=3 (int) must be the name of another workload folder"),
    ("../base", "implementations_from='../base' (str) must be the name of another workload"),
])
def test_a_bad_implementations_from_is_one_line_naming_it(tmp_path: Path, source: object,
                                                          rule: str) -> None:
    folder(tmp_path, "base", {"numpy": ("eager",)}, files=("numpy",))
    folder(tmp_path, "other", {"numpy": ("eager",)}, source=source, files=("numpy",))
    found = [r for r in rules(tmp_path) if "implementations_from" in r]
    assert len(found) == 1 and found[0].startswith(rule), found


def test_a_framework_found_in_neither_folder_is_missing(tmp_path: Path) -> None:
    folder(tmp_path, "base", {"numpy": ("eager",)}, files=("numpy",))
    folder(tmp_path, "other", {"numpy": ("eager",), "jax": ("jit",)}, source="base")
    assert "is missing (nor in base/), but SPEC.implementations names 'jax'" in rules(tmp_path)


def test_the_data_parallel_loss_is_derived_from_the_functional_loss() -> None:
    def loss(tree: dict[str, np.ndarray], data: dict[str, np.ndarray]) -> float:
        return float(np.mean((data["x"] @ tree["layer"]["w"] - data["y"]) ** 2))

    model = SimpleNamespace(loss=loss, tree=lambda flat: {"layer": dict(flat)})
    module = SimpleNamespace(build=SimpleNamespace(model=model))
    case = SimpleNamespace(data={"x": np.ones((4, 2)), "y": np.zeros((4, 1))})
    shard_loss = catalogue.data_parallel_loss(module, case)  # type: ignore[arg-type]
    assert shard_loss is not None
    w = np.full((2, 1), 0.5)
    assert shard_loss({"w": w}, np.ones((2, 2)), np.zeros((2, 1))) == pytest.approx(1.0)


def test_a_modules_own_data_parallel_loss_wins_and_none_without_a_loss() -> None:
    own = SimpleNamespace(data_parallel_loss=lambda case: "own", build=None)
    assert catalogue.data_parallel_loss(own, None) == "own"  # type: ignore[arg-type]
    bare = SimpleNamespace(build=lambda case: None)
    assert catalogue.data_parallel_loss(bare, None) is None  # type: ignore[arg-type]
