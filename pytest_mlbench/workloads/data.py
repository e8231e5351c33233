"""Seeded inputs and weights: one NumPy Generator per (seed, workload, shape), one set of bytes
for every framework, and a digest of those bytes for the record.

Timed calls of inference and transforms take a fresh probe each (an input batch, a tangent or
cotangent), drawn from a Generator keyed by the call's probe key: 0 for the checks before
timing; for a timed call, a secret the parent draws and sends as the call's turn starts
(key_schedule.KeySchedule.round_keys), so no implementation can cache a result across calls
or compute one ahead in build(). The same key gives every framework the same probe bytes.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from pytest_mlbench.precision import Policy, numpy_dtype

Arrays = dict[str, np.ndarray]


def generator(seed: int, *keys: str) -> np.random.Generator:
    """A Generator that depends only on the seed and the keys, never on run order."""
    return np.random.default_rng([seed, *(zlib.crc32(key.encode()) for key in keys)])


def cast(arrays: Mapping[str, np.ndarray], dtype: Any) -> dict[str, np.ndarray]:
    """Round every floating array to ``dtype`` (integer arrays, such as labels, are kept)."""
    return {k: v.astype(dtype) if is_float(v) else v.copy() for k, v in arrays.items()}


def widen(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Exact float64 copies of floating arrays (any narrower float widens exactly); integer
    arrays (labels, token ids) are kept as they are."""
    return {k: np.asarray(v, dtype=np.float64) if is_float(v) else np.asarray(v)
            for k, v in arrays.items()}


def digest(*trees: Mapping[str, np.ndarray]) -> str:
    """SHA-256 over names, dtypes, shapes and bytes, in key order: equal digests, equal inputs."""
    h = hashlib.sha256()
    for tree in trees:
        for key in sorted(tree):
            value = np.ascontiguousarray(tree[key])
            h.update(f"{key}:{value.dtype}:{value.shape};".encode())
            h.update(value.tobytes())
    return h.hexdigest()[:16]


def is_float(value: np.ndarray) -> bool:
    """Floating point, bfloat16 included (NumPy does not count ml_dtypes types as floating)."""
    return np.issubdtype(value.dtype, np.floating) or str(value.dtype) == "bfloat16"


def seeded_start(workload: Any, shape: Any, seed: int, policy: Policy) -> tuple[Arrays, Arrays]:
    """Data and initial params at the policy's dtype; the same seed gives the same bytes."""
    dtype = numpy_dtype(policy)
    rng = generator(seed, workload.data_key or workload.name, shape.label)
    inputs = _made(workload, "make_data", rng, shape.dims)
    params = _made(workload, "make_params", rng, shape.dims)
    return cast(inputs, dtype), cast(params, dtype)


def _made(workload: Any, name: str, rng: np.random.Generator, dims: Any) -> Arrays:
    """``SPEC.<name>(rng, dims)``, or SpecError with one line: what it raised (and where) or
    returned, for which dims, and what it must return."""
    import traceback

    from pytest_mlbench.errors import SpecError

    where = f"{workload.name}: SPEC.{name}(rng, {dict(dims)})"
    try:
        made = getattr(workload, name)(rng, dims)
    except Exception as exc:  # noqa: BLE001 - the spec's own error, reported as one line
        frames = traceback.extract_tb(exc.__traceback__)[1:]
        at = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        raise SpecError(f"{where} raised {type(exc).__name__}: {exc}{at}") from None
    if not isinstance(made, Mapping) or not all(
            isinstance(k, str) and np.asarray(v).dtype != object for k, v in made.items()):
        raise SpecError(f"{where} returned {type(made).__name__}; it must return a dict of "
                        "NumPy arrays by name")
    return dict(made)


def probe(workload: Any, shape: Any, task: Any, seed: int, index: int, policy: Policy,
          params: Mapping[str, np.ndarray], outputs_shape: tuple[int, ...] | None) -> Arrays:
    """The probe of key ``index`` of an inference or transform call, at the policy's dtype:
    an input batch (inference, Jacobians), a parameter tangent (jvp, hvp) or an output
    cotangent (vjp). Key 0 is the one the checks evaluate before timing; timed calls' keys
    are the parent's secrets."""
    rng = generator(seed, workload.data_key or workload.name, shape.label, "probe",
                    task.label, str(index))
    kind = task.transform or "infer"
    if kind in ("infer", "jacfwd", "jacrev"):
        found = workload.inputs(workload.make_data(rng, shape.dims))
    elif kind in ("jvp", "hvp"):
        found = {k: rng.standard_normal(v.shape) for k, v in params.items()}
    else:
        assert outputs_shape is not None
        found = {"u": rng.standard_normal(outputs_shape)}
    return cast(found, numpy_dtype(policy))


# -- training batches: drawn per step, revealed as the step's round starts ----------------------

def public_steps(workload: Any) -> int:
    """The training steps from the seeded start whose batch is the seeded data as they are
    (key 0) in every pass, whatever its data secret: the checked steps before timing. Every
    pass's reference trajectory shares them with the public one (Reference.trajectory)."""
    return int(workload.check_steps)


def step_key(secret: int, workload: Any, shape: Any, step: int) -> int:
    """The batch key of training step ``step`` (counted from 1 at the seeded start) in a pass
    whose data secret is ``secret``: 0 (the seeded data as they are) for the checked steps
    before timing (public_steps), else a key drawn from the secret. The parent holds the
    secret and sends each round the keys of its steps only, so no step's batch exists in the
    worker before its round starts; every case of a workload and shape in a pass draws the
    same keys, so their reference trajectories are one."""
    if step <= public_steps(workload):
        return 0
    rng = generator(secret, workload.data_key or workload.name, shape.label, "step", str(step))
    return int(rng.integers(1, 2**62))


def batch(workload: Any, shape: Any, inputs: Mapping[str, np.ndarray], key: int) -> Arrays:
    """The batch of key ``key`` from the seeded data ``inputs``: key 0, the data as they are;
    any other, the rows ``batch_rows`` draws of each array. Rows are copied, not changed, so
    the batch has the data's dtype and bytes for every framework (a worker selects the same
    rows on its device: engine/server.py), and a float64 reference drawing from widened data
    draws the same batch widened."""
    if key == 0:
        return dict(inputs)
    assert_drawable(workload, shape, inputs)
    rows = batch_rows(workload, shape, inputs, key)
    return {k: np.asarray(v) if rows[k] is None else np.asarray(v)[rows[k]]
            for k, v in inputs.items()}


DEFAULT_ROWS = "rows"  # the row group of every array a spec's batch_rows does not name


def row_groups(workload: Any, inputs: Mapping[str, Any]) -> dict[str, list[str]]:
    """The data's arrays by the group of rows a step's batch draws them by
    (``Workload.batch_rows``: name -> group, or None for an array every step reads as
    seeded; unnamed arrays are in DEFAULT_ROWS); the arrays of a group share their first
    axis (assert_drawable)."""
    declared = dict(getattr(workload, "batch_rows", None) or {})
    groups: dict[str, list[str]] = {}
    for name in sorted(inputs):
        group = declared.get(name, DEFAULT_ROWS)
        if group is not None:
            groups.setdefault(group, []).append(name)
    return groups


def assert_drawable(workload: Any, shape: Any, inputs: Mapping[str, Any]) -> None:
    """A step's batch can be drawn from these data: every name in ``batch_rows`` is an array
    of the data, and the arrays of each row group are arrays with one shared first axis.
    Raises SpecError in one line saying which arrays disagree and what is accepted."""
    from pytest_mlbench.errors import SpecError

    declared = dict(getattr(workload, "batch_rows", None) or {})
    unknown = sorted(set(declared) - set(inputs))
    label = getattr(shape, "label", "")
    where = workload.name + (f" ({label})" if label else "")
    if unknown:
        raise SpecError(f"{where}: SPEC.batch_rows names {unknown}, which SPEC.make_data does "
                        f"not return (it returns {sorted(inputs)})")
    for group, names in row_groups(workload, inputs).items():
        rows = {k: np.shape(inputs[k])[0] if np.ndim(inputs[k]) else None for k in names}
        if len(set(rows.values())) != 1 or None in rows.values():
            raise SpecError(
                f"{where}: the data's arrays {rows} are drawn as one group of rows "
                f"({group!r}) but do not share a first axis; a step's batch draws rows along "
                "the first axis, the same rows of every array of a group: give the arrays "
                "one first axis, or say in SPEC.batch_rows which arrays are drawn by other "
                "rows ({'edges': 'edges'}) or read as seeded ({'edges': None})")


def batch_rows(workload: Any, shape: Any, inputs: Mapping[str, Any],
               key: int) -> dict[str, np.ndarray | None]:
    """Each array's rows in the batch of key ``key`` (None: the array as seeded): as many
    rows drawn with replacement as its group has (``row_groups``), the same rows for every
    array of a group, each group from its own stream of the key (the data as
    ``assert_drawable`` passed them)."""
    found: dict[str, np.ndarray | None] = {k: None for k in inputs}
    for group, names in row_groups(workload, inputs).items():
        n = int(np.shape(inputs[names[0]])[0])
        stream = zlib.crc32(f"{workload.data_key or workload.name}|{shape.label}|{group}".encode())
        rows = drawn_rows(key, stream, n)
        for name in names:
            found[name] = rows
    return found


_GOLDEN, _MIX1, _MIX2 = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9),
                         np.uint64(0x94D049BB133111EB))


def drawn_rows(key: int, stream: int, n: int) -> np.ndarray:
    """``n`` row indices in [0, n), drawn with replacement by key ``key`` in ``stream``:
    SplitMix64 of the key's counter, in a few vectorised operations (a step's batch is drawn
    inside its round's clock, where a Generator's seeding alone cost 20-70 us here)."""
    base = np.uint64((key * 0x2545F4914F6CDD1D + stream) % 2**64)
    with np.errstate(over="ignore"):
        z = (np.arange(n, dtype=np.uint64) + base) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        z ^= z >> np.uint64(31)
    return (z % np.uint64(n)).astype(np.int32 if n < 2**31 else np.int64)
