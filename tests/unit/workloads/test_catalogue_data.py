"""A workload's data are checked when suites are discovered, without running a case: its
make_data and make_params on its smallest smoke shape, and a step's batch drawable from them.
A broken one is one problem naming its spec file; the folders beside it are collected."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_mlbench.workloads import catalogue

SPEC = """
import numpy as np
from pytest_mlbench import Shape, Workload

SPEC = Workload(
    name={name!r}, summary="least squares", learning_rate=0.1,
    sizes={{"smoke": (Shape({{"n": 64}}, "big"), Shape({{"n": 8}}, "small")),
            "default": (Shape({{"n": 8}}),), "paper": (Shape({{"n": 8}}),)}},
    make_data=lambda rng, d: {data},
    make_params=lambda rng, d: {params},
    loss=lambda p, d: 0.0, grad=lambda p, d: {{"w": 0 * p["w"]}},
    flops_per_step=lambda d: 1, implementations={{"numpy": ("eager",)}},
)
"""
GOOD_DATA = '{"x": rng.standard_normal((d["n"], 3)), "y": rng.standard_normal((d["n"], 1))}'
GOOD_PARAMS = '{"w": rng.standard_normal((3, 1))}'


def folder(root: Path, name: str, data: str = GOOD_DATA, params: str = GOOD_PARAMS) -> Path:
    path = root / name
    path.mkdir()
    (path / "spec.py").write_text(SPEC.format(name=name, data=data, params=params))
    (path / "impl_numpy.py").write_text("def build(case):\n    return None\n")
    return path


@pytest.mark.parametrize(("data", "params", "rule"), [
    ('{"x": rng.standard_normal((d["n"], 3)), "y": rng.standard_normal((d["n"] + 1, 1))}',
     GOOD_PARAMS, "bad (small): the data's arrays {'x': 8, 'y': 9} are drawn as one group of "
                  "rows ('rows') but do not share a first axis"),
    ('[rng.standard_normal(3)]', GOOD_PARAMS,
     "bad: SPEC.make_data(rng, {'n': 8}) returned list; it must return a dict of NumPy arrays"),
    (GOOD_DATA, '{"w": rng.standard_normal((3, d["missing"]))}',
     "bad: SPEC.make_params(rng, {'n': 8}) raised KeyError: 'missing'"),
])
def test_broken_data_are_one_problem_naming_the_spec_file_and_the_rest_is_collected(
        tmp_path: Path, data: str, params: str, rule: str) -> None:
    folder(tmp_path, "good")
    bad = folder(tmp_path, "bad", data, params)
    found = catalogue.discover(tmp_path, ("numpy",))
    assert [w.name for w in found.workloads] == ["good"]
    [problem] = found.problems
    assert problem.path == bad / "spec.py" and str(problem).startswith(f"{bad / 'spec.py'}: ")
    assert problem.rule.startswith(rule), problem.rule
