"""The seed MLP's hand-written loss and gradient on float32 copies, cast back to float64."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

F64 = load_suite_file(Path(__file__).parents[1] / "f64math" / "impl_numpy.py")


def value_and_grad(p: dict[str, Any], d: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    loss, g = F64.loss_and_grad(*(np.asarray(a, np.float32)
                                  for a in (p["w1"], p["w2"], d["x"], d["y"])))
    return np.float64(loss), {k: v.astype(np.float64) for k, v in g.items()}


build = functional.numpy(value_and_grad=value_and_grad)
