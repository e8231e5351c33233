"""The seed MLP written with each framework's layer API (torch.nn + torch.optim, Keras Dense +
Keras SGD, Flax Linen + Optax): same seeded weights, no biases, same reference as suites/mlp."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_mlbench import load_suite_file

# The matmul MLP's spec is the single source of the reference, sizes and learning rate. Loading
# it under the name the catalogue gives it means one module object, whichever loads it first.
MLP = load_suite_file(Path(__file__).parent.parent / "mlp" / "spec.py")

# Everything but the name and the implementations is the matmul MLP's, including the data
# key: both workloads start from byte-identical data and weights, so their rows compare.
SPEC = replace(
    MLP.SPEC,
    name="mlp_layers",
    summary=__doc__.splitlines()[0],
    data_key=MLP.SPEC.name,
    parallel={},
    implementations={
        "jax": ("eager", "jit"),
        "torch": ("eager", "jit"),
        "tensorflow": ("eager", "jit", "xla"),
    },
)
