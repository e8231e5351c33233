"""Framework adapters, loaded on demand: importing this package imports no framework."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from pytest_mlbench.errors import Unavailable
from pytest_mlbench.frameworks.base import Adapter, Compiled

__all__ = ["Adapter", "Compiled", "BUILTIN", "missing_reason", "load"]

# name -> "module:Class"; hooks may add more through pytest_mlbench_adapters.
BUILTIN: dict[str, str] = {
    "numpy": "pytest_mlbench.frameworks.numpy_:NumpyAdapter",
    "numba": "pytest_mlbench.frameworks.numba_:NumbaAdapter",
    "autograd": "pytest_mlbench.frameworks.autograd_:AutogradAdapter",
    "jax": "pytest_mlbench.frameworks.jax_:JaxAdapter",
    "torch": "pytest_mlbench.frameworks.torch_:TorchAdapter",
    "tensorflow": "pytest_mlbench.frameworks.tensorflow_:TensorflowAdapter",
}

_loaded: dict[str, Any] = {}


def adapter_class(name: str, registry: dict[str, Any]) -> Any:
    target = registry[name]
    if not isinstance(target, str):
        return target
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


def missing_reason(name: str, registry: dict[str, Any]) -> str | None:
    """Why the framework cannot run, checked without importing it; None when it can."""
    cls = adapter_class(name, registry)
    missing = [m for m in cls.modules if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    hint = f"pip install 'pytest-mlbench[{cls.extra}]'" if cls.extra else "pip install numpy"
    return f"{name} is not installed (no module {', '.join(missing)}): {hint}"


def load(name: str, registry: dict[str, Any]) -> Any:
    """The adapter instance for ``name`` (one per session); Unavailable when not installed."""
    if name not in _loaded:
        reason = missing_reason(name, registry)
        if reason:
            raise Unavailable(reason)
        _loaded[name] = adapter_class(name, registry)()
    return _loaded[name]
