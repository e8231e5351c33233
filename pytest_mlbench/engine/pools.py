"""The parent's side of the workers: one FrameworkPool per (framework, worker count) and pass.

A single-device case runs in a pool of one worker; a data-parallel case of N workers runs in
a pool of N ranks (torch: one process per rank over gloo or NCCL) or in one process that owns
N devices (JAX: a Mesh; on CPU the N host devices come from XLA_FLAGS). Either way the case
answers the same commands, each rank replying, and the parent checks the ranks agree.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pytest_mlbench import threads as threading_
from pytest_mlbench.engine import allocator
from pytest_mlbench.engine import protocol as p
from pytest_mlbench.engine.launcher import (
    Launch,
    Pool,
    WorkerCrashed,
    WorkerError,
    WorkerSpec,
    WorkerTimeout,
    free_loopback_port,
)
from pytest_mlbench.engine.side import Side
from pytest_mlbench.timesheet import spend

__all__ = ["CaseError", "CaseFailed", "CaseSkipped", "FrameworkPool", "PoolKey", "Pools", "Side"]
R = TypeVar("R")

TARGET = "pytest_mlbench.engine.framework_worker:build"
START_TIMEOUT_S = 300.0  # spawn + import tensorflow + warm-up on a loaded 2-core machine
TF_XLA_CACHE_FLAG = "--tf_xla_persistent_cache_directory"  # a user's removed; the pass's set
CALL_TIMEOUT_S = 600.0  # one command (a timed turn gets what its rounds should take, more)
# the matmul peak: four n x n matmuls and a jit, seconds on a loaded 2-core host. On a GPU a
# timed session that never got past its first peak was cut with nothing said; now the worker
# that hangs there fails its cases with this command named instead of the session's window
PEAK_TIMEOUT_S = 120.0


class CaseFailed(AssertionError):
    """A check failed inside the worker; the message is the check's."""


class CaseSkipped(Exception):
    """The case cannot run here (missing device, unsupported dtype)."""


class CaseError(RuntimeError):
    """The implementation raised; the message carries its traceback."""


@dataclass(frozen=True)
class PoolKey:
    framework: str
    workers: int
    side: str = ""
    slot: int = 0  # one of several equivalent pools (a session that times nothing has one a core)
    nodes: int = 1  # the groups of processes its workers are launched as


@dataclass
class FrameworkPool:
    key: PoolKey
    registry_entry: str
    threads: int
    affinity: str
    caches: str  # the session's compile-cache folder ("" for none)
    kept: str = ""  # the compile cache kept across sessions, torch's and numba's part
    xla: str = ""  # the folder of JAX's or TensorFlow's XLA cache for this pool ("": compile,
    # keep nothing)
    side: Side = field(default_factory=Side)
    compiler: str = "cpu"  # the device to warm the compiler up on at start ("" for none)
    launch: Launch | None = None  # what the workers start from (default: this process, now)
    # its cases run on a GPU: a single-device worker starts on every core of the session, so
    # that its compiler's and runtime's host threads are not confined to the one core a CPU
    # case computes on (the one-thread rule is for CPU compute: docs/MEASURING.md)
    gpu: bool = False
    # a remote.Listener: the ranks are workers a launcher started that connect to it
    # (engine/remote.py); None, the default: this host's own children
    external: Any = None
    external_wait_s: float = 300.0  # how long the session waits for them
    announce: Any = None  # where the launch commands are said (default: the log)
    pool: Pool | None = None
    info: list[p.WorkerInfo] = field(default_factory=list)  # each rank's, as the pool started
    ended: str = ""  # why the workers ended, when a command found them dead or hung

    def live(self) -> Pool:
        """The running pool; a case that still holds this pool after its workers ended (a
        crash in another case of the group, a kill) gets one line saying what ended them."""
        if self.pool is None:
            why = self.ended or "it was closed"
            raise WorkerCrashed(f"the {self.key.framework} worker this case was built in is "
                                f"gone: {why}")
        return self.pool

    def _call(self, command: p.Command, timeout: float | None = None,
              label: str = "") -> list[Any]:
        pool = self.live()  # its own error says why the workers are gone: not recorded again
        try:
            return pool.call(command.name, command, timeout, label)
        except WorkerError as exc:
            self.ended = self.ended or str(exc)
            raise

    def start(self) -> None:
        self.spawn()
        self.started()

    def spawn(self) -> None:
        """Start the processes (see Pool.spawn); ``started`` waits for them."""
        launch = self.launch or Launch.now()
        world, env, cores, dp = self._layout(launch.environ)
        threads = self.per_worker_threads(world)
        config = {"framework": self.key.framework,
                  "registry": {self.key.framework: self.registry_entry},
                  "threads": threads, "affinity": self.affinity, "compiler": self.compiler,
                  "free_cores": threading_.cores(), "dp": dp}
        env = {**threading_.environment(threads), **allocator.ENV,
               **compile_caches(self.caches, launch.environ, self.kept, self.xla), **env}
        spec = WorkerSpec(TARGET, world, config, env, self.side.python, self.side.path, cores,
                          launch)
        failed = lambda reply: isinstance(reply, p.Skipped | p.Failed | p.Raised)  # noqa: E731
        if self.external is not None:  # workers a launcher started (engine/remote.py)
            from pytest_mlbench.engine.remote import ExternalPool
            self.pool = ExternalPool(spec, self.external, nodes=self.key.nodes, name=self.name,
                                     wait_s=self.external_wait_s, announce=self.announce,
                                     start_timeout=START_TIMEOUT_S, timeout=CALL_TIMEOUT_S,
                                     failed=failed)
        else:
            self.pool = Pool(spec, start_timeout=START_TIMEOUT_S, timeout=CALL_TIMEOUT_S,
                             failed=failed)
        self.pool.spawn()

    @property
    def name(self) -> str:
        """``torch-w2-n2`` (``-<side>`` in an A/B session): what an external worker's
        ``--pool`` names."""
        key = self.key
        return (f"{key.framework}-w{key.workers}" + (f"-n{key.nodes}" if key.nodes > 1 else "")
                + (f"-{key.side}" if key.side else ""))

    @property
    def world(self) -> int:
        """The processes this pool starts (one a rank, or one a node owning its devices)."""
        return self._layout((self.launch or Launch.now()).environ)[0]

    def started(self) -> None:
        self.live().started()
        self.info = self.worker_info()

    def worker_info(self) -> list[p.WorkerInfo]:
        """Each rank's threads, versions and pinning, now."""
        return self._call(p.Info())

    def per_worker_threads(self, world: int) -> int:
        """``--mlbench-threads`` for one device; shared between the processes of a parallel
        pool (one each at least); at least one per device in a process that owns several."""
        if self.key.workers == 1:
            return self.threads
        return max(1, self.threads // world, self.key.workers // world)

    def _layout(self, environ: Mapping[str, str],
                ) -> tuple[int, dict[str, str], list[list[int]], dict[str, Any]]:
        """Processes, environment, cores per process and parallel settings of this pool. A
        parallel case gets a core per device where the machine has them, whichever framework
        runs it: torch's ranks one each (a process per rank, in ``nodes`` groups joining
        through torchrun's environment, frameworks/distributed.py), JAX's one process a node
        owning its devices (several nodes join through jax.distributed), TensorFlow's one
        process owning N logical devices (MirroredStrategy)."""
        available = threading_.cores()
        n, nodes = self.key.workers, self.key.nodes
        mine = available[:self.threads if n == 1 else max(self.threads, n)]
        if n == 1:
            return 1, {}, [available if self.gpu else mine], {}
        settings: dict[str, Any] = {"workers": n, "nodes": nodes, "timeout_s": CALL_TIMEOUT_S,
                                    "master_addr": "127.0.0.1",
                                    "master_port": free_loopback_port()}
        if self.key.framework == "tensorflow":  # one process, its logical devices (the worker)
            return 1, {}, [available[:self.per_worker_threads(1)]], settings
        if self.key.framework == "jax":
            flags = environ.get("XLA_FLAGS", "")
            # N host devices a node for a CPU mesh; JAX_PLATFORMS left as it is, so that a GPU
            # case's mesh sees the GPUs (jax_mesh asks for the case's own platform)
            env = {"XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count={n // nodes}"
                                .strip()}
            if nodes == 1:
                return 1, env, [available[:self.per_worker_threads(1)]], settings
            return nodes, env, _split(mine, nodes), settings
        return n, {"GLOO_SOCKET_IFNAME": "lo"}, _split(mine, n), settings

    # -- commands -----------------------------------------------------------------------------

    def _values(self, replies: Sequence[p.Outcome]) -> list[Any]:
        """Every rank's reply, or the first rank's skip, failure or error raised."""
        for rank, reply in enumerate(replies):
            where = f" (rank {rank})" if len(replies) > 1 else ""
            if isinstance(reply, p.Skipped):
                raise CaseSkipped(reply.why)
            if isinstance(reply, p.Failed):
                raise CaseFailed(reply.message + where)
            if isinstance(reply, p.Raised):
                frames = implementation_frames(reply.traceback)
                raise CaseError(f"{reply.error}{where}" + (f"\n{frames}" if frames else ""))
        return [r.value for r in replies if isinstance(r, p.Ok)]

    def open(self, spec: p.CaseSpec) -> int:
        opened: list[p.Opened] = self._values(self._call(p.Open(spec)))
        return opened[0].handle

    def case(self, handle: int, command: p.CaseCommand[R], timeout: float | None = None,
             ) -> list[R]:
        """The command's reply on every rank (one entry for a single-device case)."""
        return self._values(self._call(p.OnCase(handle, command), timeout,
                                       label=f"case {command.name}"))

    def close_case(self, handle: int) -> None:
        if self.pool is not None:
            self._call(p.Close(handle))

    def peak(self, dtype: str) -> float | None:
        found: list[p.PeakFound] = self._call(p.Peak(dtype), PEAK_TIMEOUT_S,
                                              label=f"matmul peak at {dtype}")
        return found[0].gflops

    def pause(self) -> None:
        if self.pool is not None:
            self.pool.pause()

    def close(self, kill: bool = False) -> None:
        if self.pool is not None:
            self.pool.close(kill)
            self.pool = None



@dataclass
class Pools:
    """A campaign's framework pools, by key: started together as a pass begins, one let run
    while a case is timed (every other worker stopped), all killed as the pass ends."""

    registry: Mapping[str, str]  # framework -> registry entry
    threads: int
    affinity: str
    launch: Launch | None = None
    caches: str = ""  # the session's compile-cache folder, set as the campaign starts
    kept: str = ""  # the compile cache kept across sessions ("": the session's own folder)
    xla: dict[str, str] = field(default_factory=dict)  # framework -> its XLA cache, this pass
    gpu: bool = False  # every case runs on a GPU (FrameworkPool.gpu)
    # a remote.Listener: every parallel case's workers are ones a launcher started
    # (--mlbench-hosts=external); None: this host's own children
    external: Any = None
    external_wait_s: float = 300.0
    announce: Any = None  # where an external pool's launch commands are said
    live: dict[PoolKey, FrameworkPool] = field(default_factory=dict)
    # external pools whose workers did not come this pass, and the line that said so: each of
    # their cases fails with it at once instead of waiting the whole wait again
    unjoined: dict[PoolKey, str] = field(default_factory=dict)

    def new(self, key: PoolKey, side: Side, compiler: str) -> FrameworkPool:
        external = self.external if key.workers > 1 else None
        return FrameworkPool(key, self.registry[key.framework], self.threads, self.affinity,
                             self.caches, kept=self.kept, xla=self.xla.get(key.framework, ""),
                             side=side, compiler=compiler, launch=self.launch, gpu=self.gpu,
                             external=external, external_wait_s=self.external_wait_s,
                             announce=self.announce)

    def expect(self, pools: Sequence[FrameworkPool]) -> None:
        """The external pools about to start, told to the listener first: a worker of one
        that connects while another waits keeps its place (remote.Listener's lobby)."""
        if self.external is None:
            return
        for pool in pools:
            if pool.key.workers > 1:
                self.external.expected[pool.name] = pool.world

    def get(self, key: PoolKey) -> FrameworkPool | None:
        return self.live.get(key)

    def __getitem__(self, key: PoolKey) -> FrameworkPool:
        return self.live[key]

    def __contains__(self, key: object) -> bool:
        return key in self.live

    def running(self, key: PoolKey, side: Side, compiler: str) -> FrameworkPool:
        """The pool of ``key``, started now if the pass start left it out (or it died)."""
        pool = self.live.get(key)
        if pool is None or pool.pool is None:
            if key in self.unjoined:
                raise WorkerTimeout(self.unjoined[key])
            pool = self.new(key, side, compiler)
            self.expect([pool])
            with spend("start"):
                self._spawn(pool)
                pool.started()
            self.live[key] = pool
        return pool

    def _spawn(self, pool: FrameworkPool) -> None:
        """Its processes started, or, for an external pool, its workers joined; ranks that
        did not come are remembered for the rest of the pass (``unjoined``)."""
        try:
            pool.spawn()
        except WorkerTimeout as exc:
            if pool.external is not None:
                self.unjoined[pool.key] = str(exc)
            raise

    def start(self, wanted: Mapping[PoolKey, tuple[Side, str]]) -> dict[PoolKey, float]:
        """Start the pools of ``wanted`` (key -> side, compiler warm-up) that are not running,
        all at once (importing TensorFlow or warming inductor up is seconds of CPU each: the
        cores share it); a single one is left to start when a case asks for it. A pool that
        fails to start is left out: its cases meet the failure again, and report it, when
        they ask for it. Returns the seconds each pool took to be ready, from the moment the
        first was spawned (they start side by side)."""
        fresh = [self.new(key, side, compiler) for key, (side, compiler) in wanted.items()
                 if key not in self.live or self.live[key].pool is None]
        if len(fresh) < 2:
            return {}
        self.expect(fresh)
        began, ready = time.perf_counter(), {}
        spawned = []
        for pool in fresh:
            try:
                self._spawn(pool)
                spawned.append(pool)
            except Exception:  # noqa: BLE001 - reported when a case asks for this pool
                pool.close(kill=True)
        for pool in spawned:
            try:
                pool.started()
            except Exception:  # noqa: BLE001 - as above
                pool.close(kill=True)
                continue
            ready[pool.key] = time.perf_counter() - began
            self.live[pool.key] = pool
        return ready

    def pause_all_but(self, pool: FrameworkPool) -> None:
        for other in self.live.values():
            if other is not pool:
                other.pause()

    def stop(self) -> None:
        """From another thread: end every worker now, so that a call in flight returns. Killed,
        not asked to stop: a cancelled campaign keeps nothing of theirs, and a busy worker (a
        compiler at work, one stopped for another's turn) would take the stop's grace and a
        CUDA context's teardown each, one pool after the other."""
        for pool in list(self.live.values()):
            pool.close(kill=True)

    def close(self) -> None:
        """End of a pass (or of the campaign): the workers' work is done and checked, and they
        keep nothing (compile caches are written as they compile), so they are killed rather
        than left to tear their frameworks down on the cores."""
        for key, pool in list(self.live.items()):
            pool.close(kill=True)
            del self.live[key]
        self.unjoined = {}
        if self.external is not None:
            self.external.forget()


def implementation_frames(text: str) -> str:
    """A worker's traceback without the harness's frames: the implementation's lines (and the
    libraries it called) are what its author needs; a failure the harness raised about the
    implementation (build() returned None) is its one line, with no frames at all."""
    harness = f"{os.sep}pytest_mlbench{os.sep}"
    kept: list[str] = []
    keep = False
    for line in text.splitlines():
        if line.startswith('  File "'):
            keep = harness not in line and '"<frozen ' not in line
            if keep:
                kept.append(line)
        elif line.startswith("    ") and keep:
            kept.append(line)
    return "Traceback (most recent call last):\n" + "\n".join(kept) if kept else ""


def compile_caches(folder: str, environ: Mapping[str, str] = os.environ,
                   kept: str = "", xla: str = "") -> dict[str, str]:
    """Where the frameworks keep compiled code. torch's inductor (FX graph and kernel caches)
    and numba (``cache=True``) share one folder: ``kept``, the compile cache kept across
    sessions (storing/compile_cache.py), or else the session's ``folder``, empty at the start.
    torch's inductor keys what it keeps by the graph, its inputs, its configuration and torch's
    version, and builds its precompiled header there once (the torch adapter moves it from the
    temporary folder, ``share_precompiled_headers``): a cold first compile in a worker cost
    8.4 s here, one in a folder an earlier session filled 3.8 s.

    JAX's XLA reads and writes its persistent cache in ``xla`` (``jax/`` there), every
    compilation however short; with ``xla`` empty it compiles afresh in the process and keeps
    nothing, a cache the user's environment configures switched off too. Which it is, pass by
    pass, is measuring/cache_plan.py's choice: an executable loaded from XLA's cache ran 7-25%
    faster in a worker than the same program compiled in it (jax-jit lstm 11.8-13.5 ms a step
    in the processes that loaded it, 14.4-16.2 in those that compiled it), so a run's
    processes must all load or all compile. TensorFlow's XLA (jit_compile) does the same in
    ``xla``'s ``tensorflow/`` (TF_XLA_FLAGS' persistent cache; a user's own one is never used):
    its entries are keyed by the traced function's name, which carries a process-wide counter,
    so the tensorflow adapter aligns that counter before each XLA trace (align_names).
    TensorFlow's AutoGraph writes converted source to temporary files
    that a killed worker cannot delete: they go to the session's folder."""
    flags = " ".join(flag for flag in environ.get("TF_XLA_FLAGS", "").split()
                     if not flag.startswith(TF_XLA_CACHE_FLAG))
    cached = {"JAX_ENABLE_COMPILATION_CACHE": "false", "TF_XLA_FLAGS": flags}
    if xla:
        cached = {"JAX_ENABLE_COMPILATION_CACHE": "true",
                  "JAX_COMPILATION_CACHE_DIR": os.path.join(xla, "jax"),
                  "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                  "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1",
                  # none of XLA's own caches beside it: their folder (under the cache's) is
                  # part of every key, and a first pass fills a folder of its own
                  "JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES": "none",
                  "TF_XLA_FLAGS": f"{flags} {TF_XLA_CACHE_FLAG}={os.path.join(xla, 'tensorflow')}"
                  .strip()}
    if not folder:
        return cached
    root = kept or folder
    return {**cached, "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor"),
            "NUMBA_CACHE_DIR": os.path.join(root, "numba"),
            "MLBENCH_TF_SCRATCH": os.path.join(folder, "tf-tmp")}


def _split(cores: list[int], n: int) -> list[list[int]]:
    """``n`` disjoint shares of ``cores`` (shared round-robin when there are fewer cores)."""
    if len(cores) >= n:
        size = len(cores) // n
        return [cores[i * size:(i + 1) * size] for i in range(n)]
    return [[cores[i % len(cores)]] for i in range(n)]
