"""suites/mlp_layers's Keras Dense layers with an extra zero-initialised bias in the first layer
(Keras's default initialiser for it), trained by the optimizer and never reported by
params()."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file

HONEST = load_suite_file(Path(__file__).parents[1] / "specs.py").honest("mlp_layers",
                                                                          "tensorflow")
keras = HONEST.keras  # imported there with the TensorFlow backend


def make_model(w1: Any, w2: Any, mixed: bool = False) -> Any:
    """The honest model with its first layer replaced by one that has a bias."""
    honest = HONEST.make_model(w1, w2, mixed)
    first = honest.layers[0]
    biased = keras.layers.Dense(first.units, use_bias=True, activation="tanh",
                                dtype=w1.dtype.name)
    model = keras.Sequential([keras.Input((w1.shape[0],), dtype=w1.dtype.name), biased,
                              *honest.layers[1:]])
    biased.kernel.assign(w1)
    return model


class Trainer(HONEST.Trainer):  # type: ignore[misc, name-defined]
    make_model = staticmethod(make_model)


def build(case: Any) -> Trainer:
    return Trainer(case)
