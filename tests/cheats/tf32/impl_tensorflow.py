"""TF32 switched back on in build(), after the adapter set and checked the fp32 policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "honest" / "impl_tensorflow.py")


def build(case: Any) -> Any:
    tf.config.experimental.enable_tensor_float_32_execution(True)
    return HONEST.build(case)
