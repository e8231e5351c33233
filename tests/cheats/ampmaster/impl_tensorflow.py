"""The honest mlp model, its tf.Variables made at bfloat16 (Keras's slots follow them)."""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

HONEST = load_suite_file(Path(__file__).parents[1] / "specs.py").honest("mlp", "tensorflow")

build = functional.tensorflow(HONEST.forward, HONEST.loss,
                              to_model=lambda p: {k: tf.cast(v, tf.bfloat16) for k, v in p.items()},
                              from_model=dict)
