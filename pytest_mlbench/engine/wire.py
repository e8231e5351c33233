"""What the parent accepts from a worker's pipe: a pickle of the protocol's own values.

A worker runs the implementation under test, and an implementation that reaches for the
harness can reach the worker's end of the pipe too. An ordinary unpickler runs whatever a
pickle names (``builtins.exec``, ``os.system``), in the parent, which judges the case: one
forged reply could rewrite the judge. So the parent reads replies with an unpickler that
resolves only what engine/protocol.py says replies hold (its dataclasses, NumPy arrays,
scalars and dtypes, ml_dtypes' bfloat16 and kin, and plain Python values) and refuses
anything else by name. It also imports nothing: every name it accepts is looked up in a
table made when this module was imported, so a reply read while another thread rearranges
``sys.modules`` (pytester's in-process runs beside the campaign thread) reads the same.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import io
import pickle
from typing import Any

import numpy as np

from pytest_mlbench.engine import protocol


class Forbidden(pickle.UnpicklingError):
    """A pickle named something a reply may not hold."""


def _numpy() -> dict[tuple[str, str], Any]:
    """NumPy's pickle of an array, a scalar and a dtype, under both module names NumPy writes
    (numpy.core before NumPy 2, numpy._core since: the two sides of an A/B gate may differ)."""
    core = importlib.import_module("numpy._core.multiarray" if hasattr(np, "_core")
                                   else "numpy.core.multiarray")
    found: dict[tuple[str, str], Any] = {("numpy", "ndarray"): np.ndarray,
                                         ("numpy", "dtype"): np.dtype}
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        found[(module, "_reconstruct")] = core._reconstruct
        found[(module, "scalar")] = core.scalar
    return found


def _extended_dtypes() -> dict[tuple[str, str], Any]:
    """ml_dtypes' scalar types (bfloat16, the float8s), which their dtypes' pickles name."""
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - a dependency of jax and tensorflow
        return {}
    return {("ml_dtypes", name): getattr(ml_dtypes, name) for name in dir(ml_dtypes)
            if isinstance(getattr(ml_dtypes, name), type)
            and issubclass(getattr(ml_dtypes, name), np.generic)}


def _protocol() -> dict[tuple[str, str], Any]:
    return {(protocol.__name__, name): value for name, value in vars(protocol).items()
            if isinstance(value, type) and dataclasses.is_dataclass(value)
            and value.__module__ == protocol.__name__}


_PLAIN = {("builtins", t.__name__): t
          for t in (complex, set, frozenset, slice, range, bytearray, int, float, bool, str,
                    bytes, tuple, list, dict)}
_PLAIN[("collections", "OrderedDict")] = collections.OrderedDict
ACCEPTED: dict[tuple[str, str], Any] = {**_PLAIN, **_numpy(), **_extended_dtypes(),
                                        **_protocol()}


class _Reader(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = ACCEPTED.get((module, name))
        if found is None:
            raise Forbidden(f"the reply names {module}.{name}, which a reply may not hold")
        return found


def loads(data: bytes) -> Any:
    """A worker's reply, as the protocol's values only (``Forbidden`` names what was not)."""
    return _Reader(io.BytesIO(data)).load()
