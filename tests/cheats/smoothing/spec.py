"""The real CNN (suites/cnn), whose torch implementation smooths its labels by 0.1."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pytest_mlbench import load_suite_file

CNN = load_suite_file(Path(__file__).parents[2] / "models" / "cnn" / "spec.py")
SPEC = dataclasses.replace(CNN.SPEC, name="smoothing", implementations={"torch": ("eager",)})
