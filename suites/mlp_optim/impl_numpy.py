"""The seed MLP in NumPy with its hand-written backward pass (suites/mlp/impl_numpy.py's
value_and_grad), stepped by the spec's own update at the policy dtype: NumPy has no optimizer."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

MLP = load_suite_file(Path(__file__).parent.parent / "mlp" / "impl_numpy.py")
build = functional.numpy(value_and_grad=MLP.value_and_grad)
