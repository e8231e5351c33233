"""The features in float32 for a case's calls before timing (an inference's first probes,
arithmetic.PRECISE_POINTS of them; a transform's first), in float64 (cast back) for every
later one: only an audited round's result can tell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional
from pytest_mlbench.checking.arithmetic import PRECISE_POINTS

F64 = load_suite_file(Path(__file__).parents[1] / "f64infer" / "impl_torch.py")


def build(case: Any) -> Any:
    calls = [0]  # this case's: a worker serves several cases
    honest = PRECISE_POINTS if case.task.kind == "infer" else 1

    def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
        calls[0] += 1
        if calls[0] <= honest:
            return torch.tanh(data["x"] @ p["w1"]) * p["w2"].T
        return F64.forward(p, data)

    return functional.torch(forward)(case)
