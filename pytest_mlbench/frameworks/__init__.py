"""Framework adapters, loaded on demand: importing this package imports no framework."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_mlbench.errors import Unavailable

if TYPE_CHECKING:
    from pytest_mlbench.frameworks.base import Adapter, Compiled

__all__ = ["Adapter", "Compiled", "BUILTIN", "missing_reason", "load", "entry"]


def __getattr__(name: str) -> Any:
    """``Adapter`` and ``Compiled`` from base.py on first use (it imports NumPy): the plugin's
    start-up reads BUILTIN only."""
    if name in ("Adapter", "Compiled"):
        from pytest_mlbench.frameworks import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# name -> "module:Class" (or "/path/to/file.py:Class"); hooks may add more through
# pytest_mlbench_adapters, as classes or such strings.
BUILTIN: dict[str, str] = {
    "numpy": "pytest_mlbench.frameworks.numpy_:NumpyAdapter",
    "numba": "pytest_mlbench.frameworks.numba_:NumbaAdapter",
    "autograd": "pytest_mlbench.frameworks.autograd_:AutogradAdapter",
    "jax": "pytest_mlbench.frameworks.jax_:JaxAdapter",
    "torch": "pytest_mlbench.frameworks.torch_:TorchAdapter",
    "tensorflow": "pytest_mlbench.frameworks.tensorflow_:TensorflowAdapter",
}

_loaded: dict[str, Any] = {}


def entry(target: Any) -> str:
    """A registry value as a string a worker process can load: ``module:Class``, or
    ``/path/file.py:Class`` for a class defined in a conftest.py (not importable by name)."""
    if isinstance(target, str):
        return target
    module = sys.modules.get(target.__module__)
    if module is not None and importlib.util.find_spec(target.__module__) is not None \
            and not target.__module__.startswith("conftest"):
        return f"{target.__module__}:{target.__qualname__}"
    return f"{inspect.getfile(target)}:{target.__qualname__}"


def adapter_class(name: str, registry: dict[str, Any]) -> Any:
    target = registry[name]
    if not isinstance(target, str):
        return target
    module_name, _, cls = target.rpartition(":")
    if module_name.endswith(".py"):
        path = Path(module_name)
        spec = importlib.util.spec_from_file_location(f"mlbench_adapter_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    return getattr(module, cls)


def missing_reason(name: str, registry: dict[str, Any], mode: str = "") -> str | None:
    """Why the framework (in compile mode ``mode``, where given) cannot run, checked without
    importing it; None when it can. A mode that needs more than its framework (torch's xla:
    torch_xla) says so in the adapter class's ``modes_need``: {mode: (modules, how)}."""
    cls = adapter_class(name, registry)
    missing = [m for m in cls.modules if importlib.util.find_spec(m) is None]
    if not missing:
        return _mode_missing(name, cls, mode)
    hint = f"pip install 'pytest-mlbench[{cls.extra}]'" if cls.extra else "pip install numpy"
    return f"{name} is not installed (no module {', '.join(missing)}): {hint}"


def _mode_missing(name: str, cls: Any, mode: str) -> str | None:
    modules, how = getattr(cls, "modes_need", {}).get(mode, ((), ""))
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return f"{name}'s {mode} mode needs {', '.join(missing)}, which is not installed: {how}"


def load(name: str, registry: dict[str, Any]) -> Any:
    """The adapter instance for ``name`` (one per process); Unavailable when not installed."""
    if name not in _loaded:
        reason = missing_reason(name, registry)
        if reason:
            raise Unavailable(reason)
        _loaded[name] = adapter_class(name, registry)()
    return _loaded[name]
