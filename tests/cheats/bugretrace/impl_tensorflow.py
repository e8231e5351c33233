"""The honest step, whose batch is repeated twice after the checked steps (the same mean, a
new shape)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf

from pytest_mlbench import load_suite_file

CHEATS = Path(__file__).parents[1]
SPECS = load_suite_file(CHEATS / "specs.py")
HONEST = load_suite_file(CHEATS / "honest" / "impl_tensorflow.py")


def concat(parts: list[Any]) -> Any:
    return tf.concat(parts, 0)


def build(case: Any) -> Any:
    return SPECS.AfterChecks(HONEST.build(case), SPECS.doubled_batch(case, concat))
