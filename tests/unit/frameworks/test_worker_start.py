"""A worker's process: its framework's start loads no other framework, a killed TensorFlow
worker leaves AutoGraph's files in the session's folder rather than the system's, and a worker
compiles XLA itself whatever persistent cache the user configured (engine/pools.compile_caches).

Each framework's worker starts once for all three (the ``started`` fixture): a TensorFlow
process is 5-10 s of CPU on the 2-core host, and these tests started four of them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_mlbench import frameworks

INSTALLED = [name for name in frameworks.BUILTIN
             if frameworks.missing_reason(name, frameworks.BUILTIN) is None]

# A worker's start, in a process of its own with a worker's environment (a user's persistent
# XLA caches configured under it): the adapter's import, threads, policy and a first matmul,
# then the modules of the other frameworks it loaded. JAX's and TensorFlow's processes go on
# to the steps the tests after it look at (STEPS).
ALONE = """
import sys
from pytest_mlbench import frameworks
adapter = frameworks.load(sys.argv[1], frameworks.BUILTIN)
adapter.set_threads(1)
adapter.setup("cpu", __import__("pytest_mlbench.precision").precision.POLICIES["fp32"], 0)
adapter.matmul_gflops("float32", 64, 1)
others = {n: frameworks.adapter_class(n, frameworks.BUILTIN).modules
          for n in frameworks.BUILTIN if n not in ("numpy", sys.argv[1])}
print(sorted(m for n, mods in others.items() for m in mods if m in sys.modules), flush=True)
"""

XLA_STEP = {
    "jax": "import jax, jax.numpy as jnp\n"
           "jax.jit(lambda x: jnp.tanh(x @ x.T) * 0.5)(jnp.ones((8, 8))).block_until_ready()\n",
    # TensorFlow imported as a worker imports it: without JAX (a second of start-up)
    "tensorflow": "from pytest_mlbench.frameworks.tensorflow_ import import_tensorflow\n"
                  "import_tensorflow()\n"
                  "import tensorflow as tf\n"
                  "tf.function(lambda x: tf.tanh(x @ tf.transpose(x)) * 0.5,\n"
                  "            jit_compile=True)(tf.ones((8, 8))).numpy()\n",
}

KILLED = """
import os, signal

def step(x):
    return tf.tanh(x) * 2.0 if tf.reduce_sum(x) > 0 else x  # AutoGraph converts the branch

adapter.compile(step, "jit").fn(tf.ones(4)).numpy()
os.kill(os.getpid(), signal.SIGKILL)  # as a session ends its workers
"""

STEPS = {"jax": XLA_STEP["jax"], "tensorflow": XLA_STEP["tensorflow"] + KILLED}
EXIT = {"tensorflow": -9}  # killed; every other process ends by itself


def user_caches(user: Path) -> dict[str, str]:
    """The persistent XLA caches a user may configure, both frameworks', in ``user``."""
    from pytest_mlbench.engine.pools import TF_XLA_CACHE_FLAG

    return {"JAX_COMPILATION_CACHE_DIR": str(user),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
            "TF_XLA_FLAGS": f"--tf_xla_auto_jit=0 {TF_XLA_CACHE_FLAG}={user}"}


def skip_unless_installed(name: str) -> None:
    """Without importing it here: this process needs no framework (TensorFlow's import is
    seconds)."""
    if name not in INSTALLED:
        pytest.skip(f"{name} is not installed")


def written(user: Path) -> bool:
    return user.is_dir() and any(user.iterdir())


@dataclass(frozen=True)
class Started:
    """A worker's process and its folders: ``system`` its TMPDIR, ``session`` the session's
    folder compile_caches gave it, ``user`` the user's configured XLA cache."""

    done: subprocess.CompletedProcess[str]
    system: Path
    session: Path
    user: Path


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Started]:
    """Each framework's worker process (ALONE, then its STEPS), run once for the tests that
    read it."""
    from pytest_mlbench.engine.pools import compile_caches

    runs: dict[str, Started] = {}

    def start(name: str) -> Started:
        if name not in runs:
            where = tmp_path_factory.mktemp(f"started-{name}")
            system, session, user = where / "tmp", where / "session", where / "user-cache"
            system.mkdir()
            configured = user_caches(user)
            env = {**os.environ, **configured, "TMPDIR": str(system),
                   **compile_caches(str(session), configured)}
            script = where / "worker.py"  # a file: AutoGraph converts only code whose source it reads
            script.write_text(ALONE + STEPS.get(name, ""))
            done = subprocess.run([sys.executable, str(script), name], env=env,
                                  capture_output=True, text=True, check=False)
            runs[name] = Started(done, system, session, user)
        return runs[name]

    return start


@pytest.mark.parametrize("name", INSTALLED)
def test_a_framework_started_alone_loads_no_other_framework(
        started: Callable[[str], Started], name: str) -> None:
    """A worker holds one framework: its adapter's start (import, threads, policy, a first
    matmul) loads no other framework's modules (TensorFlow's import would load JAX)."""
    done = started(name).done
    assert done.returncode == EXIT.get(name, 0), done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[0] == "[]", done.stdout


def test_a_killed_tensorflow_worker_leaves_nothing_in_the_temporary_folder(
        started: Callable[[str], Started]) -> None:
    """AutoGraph deletes its converted source at exit, which a killed worker never reaches:
    in a worker (the environment compile_caches gives it) the files go to the session's
    folder instead of the system's."""
    skip_unless_installed("tensorflow")
    ran = started("tensorflow")
    assert ran.done.returncode == -9, ran.done.stderr[-2000:]
    assert list(ran.system.iterdir()) == []
    assert list((ran.session / "tf-tmp").glob("__autograph_generated_file*"))


@pytest.mark.parametrize("framework", sorted(XLA_STEP))
def test_a_worker_compiles_xla_itself_even_where_the_user_configured_a_persistent_cache(
        started: Callable[[str], Started], tmp_path: Path, framework: str) -> None:
    """An executable XLA loads from its persistent cache runs faster than the same program
    compiled in the process (engine/workers.compile_caches): every process compiles, so every
    process measures the same thing. The user's cache is left alone (nothing written to it)
    and their other XLA flags are kept; without the worker's environment the same step does
    write to it, so the check can fail."""
    skip_unless_installed(framework)
    from pytest_mlbench.engine.pools import compile_caches

    user = tmp_path / "user-cache"
    configured = user_caches(user)
    assert compile_caches(str(tmp_path / "session"), configured)["TF_XLA_FLAGS"] == \
        "--tf_xla_auto_jit=0"
    ran = started(framework)
    assert ran.done.returncode == EXIT.get(framework, 0), ran.done.stderr[-2000:]
    assert not written(ran.user), framework
    subprocess.run([sys.executable, "-c", XLA_STEP[framework]], check=True,
                   capture_output=True, env={**os.environ, **configured})
    assert written(user), framework
