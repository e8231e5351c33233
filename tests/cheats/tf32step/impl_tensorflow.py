"""TF32 on for each step after the checked ones, and off again before returning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf

from pytest_mlbench import load_suite_file

CHEATS = Path(__file__).parents[1]
SPECS = load_suite_file(CHEATS / "specs.py")
HONEST = load_suite_file(CHEATS / "honest" / "impl_tensorflow.py")


def lowered(inner: Any, n: int) -> Any:
    tf.config.experimental.enable_tensor_float_32_execution(True)
    try:
        return inner.step()
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(False)


def build(case: Any) -> Any:
    return SPECS.AfterChecks(HONEST.build(case), lowered)
