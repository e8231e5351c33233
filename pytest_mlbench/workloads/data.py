"""Seeded inputs and weights: one NumPy Generator per (seed, workload, shape), one set of bytes
for every framework, and a digest of those bytes for the record.

Timed calls of inference and transforms take a fresh probe each (an input batch, a tangent or
cotangent), drawn from a Generator keyed by the call's probe key: 0 for the checks before
timing; for a timed call, a secret the parent draws and sends as the call's turn starts
(pipeline.CaseRun._keys), so no implementation can cache a result across calls or compute
one ahead in build(). The same key gives every framework the same probe bytes.
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

def step_key(secret: int, workload: Any, shape: Any, step: int) -> int:
    """The batch key of training step ``step`` (counted from 1 at the seeded start) in a pass
    whose data secret is ``secret``: 0 (the seeded data as they are) for the checked steps
    before timing, else a key drawn from the secret. The parent holds the secret and sends
    each round the keys of its steps only, so no step's batch exists in the worker before its
    round starts; every case of a workload and shape in a pass draws the same keys, so their
    reference trajectories are one."""
    if step <= workload.check_steps:
        return 0
    rng = generator(secret, workload.data_key or workload.name, shape.label, "step", str(step))
    return int(rng.integers(1, 2**62))


def batch(workload: Any, shape: Any, inputs: Mapping[str, np.ndarray], key: int) -> Arrays:
    """The batch of key ``key`` from the seeded data ``inputs``: key 0, the data as they are;
    any other, as many rows drawn with replacement from them (along the first axis, which
    every array shares), the same rows of every array. Rows are copied, not changed, so the
    batch has the data's dtype and bytes for every framework, and a float64 reference drawing
    from widened data draws the same batch widened."""
    if key == 0:
        return dict(inputs)
    rows = {np.shape(v)[0] for v in inputs.values()}
    if len(rows) != 1:
        from pytest_mlbench.errors import SpecError

        raise SpecError(f"{workload.name}: the data's arrays have {sorted(rows)} rows; every "
                        "array of SPEC.make_data must have the batch along its first axis")
    (n,) = rows
    rng = generator(key, workload.data_key or workload.name, shape.label, "rows")
    take = rng.integers(0, n, n)
    return {k: np.asarray(v)[take] for k, v in inputs.items()}
