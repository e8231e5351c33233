"""engine/wire.py: the parent reads the protocol's values from a worker, NumPy's arrays at
every dtype the suite uses included, and refuses by name anything else a pickle may call."""

from __future__ import annotations

import collections
import pickle

import ml_dtypes
import numpy as np
import pytest

from pytest_mlbench.engine import protocol, wire


def _round_trip(value: object) -> object:
    return wire.loads(pickle.dumps(value, protocol=pickle.DEFAULT_PROTOCOL))


def test_the_protocols_values_read_back_equal() -> None:
    arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3),
              "b": np.ones(3, dtype=ml_dtypes.bfloat16), "i": np.arange(3, dtype=np.int32),
              "m": np.zeros(2, dtype=bool), "d": np.float64(0.25)}
    reply = ("ok", protocol.Ok(protocol.Finished(
        traces={"step": 1}, compiles={"build": 1}, backend_compiles={}, compile_s=0.5,
        policy=None, census=(12, frozenset({"w"})), dtypes={"w": "float32"},
        snapshot={"params": arrays, "state": {}},
        trained=protocol.Gradient(loss=np.float64(1.5), grads=arrays),
        resident={"params": [4, 4]}, collectives=[0.1])))
    back = _round_trip(reply)
    assert _equal(back, reply)
    got = back[1].value.trained.grads  # type: ignore[index]
    assert got["b"].dtype == ml_dtypes.bfloat16 and got["w"].dtype == np.float32
    assert _round_trip(collections.OrderedDict(a=1, b={2, 3})) == {"a": 1, "b": {2, 3}}
    assert _round_trip(complex(1, 2)) == complex(1, 2)


def _equal(a: object, b: object) -> bool:
    """Equality through arrays (dataclass == compares arrays elementwise)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(np.asarray(a, np.float64), np.asarray(b, np.float64)))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) \
            and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "__dataclass_fields__"):
        return type(a) is type(b) and _equal(vars(a), vars(b))
    return bool(a == b)


class _Calls:
    def __init__(self, fn: object, *args: object) -> None:
        self.fn, self.args = fn, args

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return self.fn, self.args


@pytest.mark.parametrize("named", [
    _Calls(eval, "1"),                       # a builtin that runs code
    _Calls(pickle.loads, b"x"),              # a module outside the protocol
    _Calls(protocol.asdict, protocol.Done()),  # a function of the protocol's module
    _Calls(np.save, "x", 1),                 # NumPy, but not an array, scalar or dtype
    _Calls(collections.namedtuple, "T", "a"),
])
def test_anything_else_a_pickle_names_is_refused_by_name(named: _Calls) -> None:
    data = pickle.dumps(named)
    with pytest.raises(wire.Forbidden, match="which a reply may not hold"):
        wire.loads(data)


def test_a_dotted_name_is_not_a_way_around() -> None:
    """Protocol 4 pickles a nested name as ``module`` + ``Outer.inner``: refused too."""
    data = pickle.dumps(protocol.Gradient.__init__, protocol=4)
    with pytest.raises(wire.Forbidden, match="Gradient.__init__"):
        wire.loads(data)
