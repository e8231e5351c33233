"""pytest-mlbench: fair, correctness-gated benchmarks of automatic-differentiation frameworks.

What a workload folder may import is here (ADDING_WORKLOADS.md): the spec types, the task
and optimizer constructors, the loader for sibling files, and the builders
(``functional.jax(forward, loss)`` and one per framework). Importing this package imports no
framework.
"""

from __future__ import annotations

from pytest_mlbench import functional
from pytest_mlbench.catalogue import load_suite_file
from pytest_mlbench.data import digest
from pytest_mlbench.optim import Optimizer, adam, adamw, momentum, sgd

# a Trainer around a hand-written step function (steps.py), the level below the builders
from pytest_mlbench.steps import FunctionalSGD, StepTrainer, sgd_step, torch_value_and_grad
from pytest_mlbench.workload import (
    Arrays,
    Shape,
    Task,
    Tolerance,
    Tolerances,
    Workload,
    infer,
    train,
    transform,
)

__version__ = "0.2.0"
__all__ = [
    "__version__", "Workload", "Shape", "Task", "Tolerance", "Tolerances", "train", "infer",
    "transform", "Optimizer", "sgd", "momentum", "adam", "adamw", "load_suite_file",
    "functional", "Arrays", "digest",
    "StepTrainer", "FunctionalSGD", "sgd_step", "torch_value_and_grad",
]
