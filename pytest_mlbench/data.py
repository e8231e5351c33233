"""Seeded inputs and weights: one NumPy Generator per (seed, workload, shape), one set of bytes
for every framework, and a digest of those bytes for the benchmark record."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np


def generator(seed: int, *keys: str) -> np.random.Generator:
    """A Generator that depends only on the seed and the keys, never on run order."""
    return np.random.default_rng([seed, *(zlib.crc32(key.encode()) for key in keys)])


def cast(arrays: Mapping[str, np.ndarray], dtype: Any) -> dict[str, np.ndarray]:
    """Round every floating array to ``dtype`` (integer arrays, such as labels, are kept)."""
    return {k: v.astype(dtype) if is_float(v) else v.copy() for k, v in arrays.items()}


def widen(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Exact float64 copies of floating arrays (any narrower float widens exactly)."""
    return {k: np.asarray(v, dtype=np.float64) if is_float(v) else v for k, v in arrays.items()}


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
