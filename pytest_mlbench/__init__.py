"""pytest-mlbench: fair, correctness-gated benchmarks of automatic-differentiation frameworks.

What a workload folder may import is here (ADDING_WORKLOADS.md): the spec types, the task
and optimizer constructors, the loader for sibling files, and the builders
(``functional.jax(forward, loss)`` and one per framework). Importing this package imports no
framework, and no NumPy either: each name is imported from its module on first use (PEP 562),
so that the pytest plugin, loaded into every session of its environment, starts light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_mlbench.builders import functional
    from pytest_mlbench.builders.steps import FunctionalSGD, StepTrainer, sgd_step, torch_value_and_grad
    from pytest_mlbench.control import control_matmul
    from pytest_mlbench.workloads.catalogue import load_suite_file
    from pytest_mlbench.workloads.data import digest
    from pytest_mlbench.workloads.optim import Optimizer, adam, adamw, momentum, sgd
    from pytest_mlbench.workloads.spec import (
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

# public name -> the module that defines it
_HOME = {
    "functional": "pytest_mlbench.builders.functional",
    "load_suite_file": "pytest_mlbench.workloads.catalogue",
    "digest": "pytest_mlbench.workloads.data",
    "control_matmul": "pytest_mlbench.control",  # the control benchmark's body (test_control.py)
    **dict.fromkeys(("Optimizer", "sgd", "momentum", "adam", "adamw"), "pytest_mlbench.workloads.optim"),
    # a Trainer around a hand-written step function, the level below the builders
    **dict.fromkeys(("StepTrainer", "FunctionalSGD", "sgd_step", "torch_value_and_grad"),
                    "pytest_mlbench.builders.steps"),
    **dict.fromkeys(("Workload", "Shape", "Task", "Tolerance", "Tolerances", "train", "infer",
                     "transform", "Arrays"), "pytest_mlbench.workloads.spec"),
}
__all__ = [
    "__version__", "Workload", "Shape", "Task", "Tolerance", "Tolerances", "train", "infer",
    "transform", "Optimizer", "sgd", "momentum", "adam", "adamw", "load_suite_file",
    "functional", "Arrays", "digest",
    "StepTrainer", "FunctionalSGD", "sgd_step", "torch_value_and_grad", "control_matmul",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # not cached here: the module in sys.modules is the one asked every time (a test session
    # that unloads and re-imports modules, as pytester does, gets its classes, not stale ones)
    module = importlib.import_module(home)
    return module if home.rsplit(".", 1)[-1] == name else getattr(module, name)


def __dir__() -> list[str]:
    return sorted(__all__)
