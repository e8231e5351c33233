from __future__ import annotations

from pathlib import Path

import numpy as np

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

MODELS = load_suite_file(Path(__file__).parents[1] / "models.py")
build = functional.numpy(lambda p, d: MODELS.forward(np, p, d),
                         value_and_grad=MODELS.numpy_value_and_grad)
