"""pytest-mlbench's own hooks. Implement them in a conftest.py to change behaviour without
flags (the way pytest-xdist lets a conftest choose its scheduler)."""

from __future__ import annotations

from typing import Any


def pytest_mlbench_adapters(config: Any) -> dict[str, Any] | None:
    """Return extra framework adapters, ``{name: AdapterClass}``, to benchmark alongside the
    built-in six. The class follows ``pytest_mlbench.frameworks.base.Adapter``; the name then
    works in ``--mlbench-frameworks`` and as ``impl_<name>.py`` in a workload folder. Cases run
    in worker processes, which load the class by module and name, or from the file that
    defines it when that is a conftest.py.

    .. code-block:: python

        # conftest.py
        from my_adapters import MlxAdapter

        def pytest_mlbench_adapters(config):
            return {"mlx": MlxAdapter}
    """


def pytest_mlbench_modify_cases(config: Any, cases: list[Any]) -> None:
    """Reorder or drop benchmark cases in place before they are parametrized. Each item is a
    ``pytest_mlbench.workloads.case.CaseId`` (workload, shape, task, framework, variant, device,
    precision, workers).

    .. code-block:: python

        # conftest.py: never time eager TensorFlow, it is not what we ship
        def pytest_mlbench_modify_cases(config, cases):
            cases[:] = [c for c in cases if (c.framework, c.variant) != ("tensorflow", "eager")]
    """
