"""A data-parallel step whose gradients add up over the ranks instead of averaging: torch's
rank loss (impl_torch.py), TensorFlow's MirroredStrategy with its loss left undivided by the
replicas (the hook's adapter, hooks.py), so Keras's sum over replicas doubles the step."""

from __future__ import annotations

from pathlib import Path

from pytest_mlbench import load_suite_file

SPECS = load_suite_file(Path(__file__).parents[1] / "specs.py")
SPEC = SPECS.mlp("dpsum", {"torch": "eager", "tensorflow": "jit"}, torch=("eager",),
                 tensorflow=("jit",))
