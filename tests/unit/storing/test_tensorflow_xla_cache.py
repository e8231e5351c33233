"""TensorFlow's XLA executables kept in the compile cache (storing/compile_cache.py,
engine/pools.compile_caches, frameworks/tensorflow_.align_names): a second process, whose
names' counter stood elsewhere when it traced, loads what the first compiled, and the adapter
counts it; a cut-short entry is set aside before a worker reads it (TensorFlow fails the case
on one: ``OutOfRangeError: Read less bytes than requested``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_mlbench.storing import compile_cache

# one XLA training step through the adapter, after ``argv[1]`` names used elsewhere (other
# cases, a pass's checks): its cache counts, and how many entries the folder holds
STEP = """
import sys
from pytest_mlbench.frameworks.tensorflow_ import TensorflowAdapter
adapter = TensorflowAdapter()
import tensorflow as tf
from tensorflow.python.framework import ops
for _ in range(int(sys.argv[1])):
    ops.uid()
w = tf.Variable(tf.ones((16, 4)))
def step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.tanh(x @ w) ** 2)
    w.assign_sub(0.1 * tape.gradient(loss, w))
    return loss
adapter.compile(step, "xla").fn(tf.ones((8, 16))).numpy()
print("counts", *adapter.persistent_cache())
"""


def run_step(env: dict[str, str], earlier: int) -> tuple[tuple[int, int], str]:
    done = subprocess.run([sys.executable, "-c", STEP, str(earlier)], capture_output=True,
                          text=True, env={**os.environ, **env, "TF_CPP_MIN_LOG_LEVEL": "0",
                                          "TF_CPP_VMODULE": "device_executable_persistor=1"})
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [li for li in done.stdout.splitlines() if li.startswith("counts")]
    loaded, compiled = map(int, line.split()[1:])
    return (loaded, compiled), done.stderr


def test_a_second_process_loads_the_xla_executable_the_first_compiled(tmp_path: Path) -> None:
    """A worker's environment with the pass's XLA folder: the first process compiles and
    writes one entry; the second, after 12,345 other names, loads it (TensorFlow's own log
    says so) and writes nothing; the adapter's counts say which."""
    pytest.importorskip("tensorflow")
    from pytest_mlbench.engine.pools import compile_caches

    env = compile_caches(str(tmp_path / "session"), {}, xla=str(tmp_path / "xla"))
    first, _ = run_step(env, 0)
    entries = sorted((tmp_path / "xla" / "tensorflow").iterdir())
    assert first == (0, 1) and len(entries) == 1, (first, entries)
    written = entries[0].stat().st_mtime_ns
    second, log = run_step(env, 12345)
    assert second == (1, 0), log[-3000:]
    assert "Loading cached entry" in log
    assert sorted((tmp_path / "xla" / "tensorflow").iterdir()) == entries
    assert entries[0].stat().st_mtime_ns == written


def varint(n: int) -> bytes:
    out = b""
    while True:
        out += bytes([n & 0x7F | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            return out


def test_a_cut_short_tensorflow_entry_is_set_aside(tmp_path: Path) -> None:
    """protobuf's wire format walked without TensorFlow: a whole entry (a varint field, a
    300-byte field, a fixed64 one) is kept, the same cut short or garbage is not, and a
    folder holding one is moved aside whole."""
    whole = b"\x08" + varint(123456789) + b"\x12" + varint(300) + bytes(300) + b"\x19" + bytes(8)
    assert compile_cache._protobuf(whole) == ""
    assert compile_cache._protobuf(whole[:200]).startswith("not a whole protobuf")
    assert compile_cache._protobuf(whole[:-1]).startswith("not a whole protobuf")
    assert compile_cache._protobuf(b"garbage" * 5).startswith("not a whole protobuf")
    assert compile_cache._protobuf(b"") == "empty"
    folder = tmp_path / "tensorflow"
    folder.mkdir()
    old = time.time() - 2 * compile_cache.YOUNG_S  # older than a write another run may be doing
    (folder / "xla_compile_cache__1__2__XLA_CPU_JIT.pb").write_bytes(whole)
    os.utime(folder / "xla_compile_cache__1__2__XLA_CPU_JIT.pb", (old, old))
    assert compile_cache.check(str(tmp_path)) == []
    (folder / "xla_compile_cache__3__4__XLA_CPU_JIT.pb").write_bytes(whole[:200])
    os.utime(folder / "xla_compile_cache__3__4__XLA_CPU_JIT.pb", (old, old))
    ((framework, line),) = compile_cache.check(str(tmp_path))
    assert framework == "tensorflow" and "__3__4__" in line and "not a whole protobuf" in line
    assert not folder.exists()
    assert [p.name[:11] for p in (tmp_path / "set-aside").iterdir()] == ["tensorflow-"]
