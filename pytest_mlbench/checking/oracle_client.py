"""The parent's side of the autodiff oracle (engine/oracle_worker.py is the worker's): float64
gradients, transforms and Jacobians for workloads without a hand-derived gradient, from JAX
(x64) or else torch (float64), each backend in a long-lived worker of its own, on the CPU.
A shape too large for that (Shape.reference "float32") asks for float32 on the case's device
instead: another worker per backend, device and dtype, the GPU visible to it."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from typing import Any

from pytest_mlbench.engine.launcher import Launch, Pool, WorkerError, WorkerSpec
from pytest_mlbench.errors import Unavailable
from pytest_mlbench.timesheet import spend

BACKENDS = ("jax", "torch")
# a worker's environment by device: the CPU oracle sees no GPU; a GPU one allocates as it goes
# and hands memory back (the session's framework workers share the device)
ENVIRONMENT = {"cpu": {"JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""},
               "gpu": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                       "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}}


class OracleService:
    """Long-lived oracle workers, one per installed backend, started on first use.

    Safe to call from several threads: a lock per backend is held while its pool starts and
    around each call (a call is a request and its reply on one socket; two must not
    interleave), and a pause or close waits for the call in flight (a worker stopped mid-call
    would leave its caller waiting out the timeout)."""

    def __init__(self, python: str = "", path: tuple[str, ...] = (),
                 launch: Launch | None = None) -> None:
        self.pools: dict[str, Pool] = {}
        self.python, self.path = python, path
        self.launch = launch  # what its workers start from (default: this process, then)
        self._lock = threading.Lock()  # self.pools and self._locks
        self._locks: dict[str, threading.Lock] = {}

    @property
    def backends(self) -> list[str]:
        return [b for b in BACKENDS if importlib.util.find_spec(b) is not None]

    def call(self, command: str, payload: Any, backend: str | None = None,
             device: str = "cpu", dtype: str = "float64") -> Any:
        backend = backend or next(iter(self.backends), "")
        if not backend:
            raise Unavailable("this workload's reference comes from an autodiff oracle: "
                              "pip install 'pytest-mlbench[jax]' (or [torch])")
        if device not in ENVIRONMENT:
            raise Unavailable(f"no autodiff oracle on a {device}: only {', '.join(ENVIRONMENT)}")
        # the float64 CPU oracle keeps its plain name; the others are named by what differs
        name = backend if (device, dtype) == ("cpu", "float64") else \
            f"{backend} {dtype} {device}"
        lock = self._pool_lock(name)
        with spend("waiting"):  # another thread's call
            lock.acquire()
        try:
            pool = self._pool(name, {"backend": backend, "device": device, "dtype": dtype})
            try:
                return pool.call(command, payload)[0]
            except WorkerError as exc:  # dead or hung: the next call starts a fresh worker
                pool.close()
                with self._lock:
                    self.pools.pop(name, None)
                raise type(exc)(f"the {name} {'' if ' ' in name else 'float64 '}oracle: "
                                f"{exc}") from None
        finally:
            lock.release()

    def _pool_lock(self, name: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(name, threading.Lock())

    def _pool(self, name: str, config: dict[str, str]) -> Pool:
        """The pool ``name``, started if need be (the caller holds its lock)."""
        with self._lock:
            pool = self.pools.get(name)
        if pool is None:
            spec = WorkerSpec("pytest_mlbench.engine.oracle_worker:build", 1, config,
                              ENVIRONMENT[config["device"]],
                              self.python, self.path, launch=self.launch)
            pool = Pool(spec, start_timeout=180.0, timeout=600.0)
            try:
                pool.start()
            except BaseException:
                pool.close()  # a worker that started but did not answer is not left behind
                raise
            with self._lock:
                self.pools[name] = pool
        return pool

    def _each(self, act: Callable[[Pool], None], forget: bool = False) -> None:
        with self._lock:
            names = list(self.pools)
        for name in names:
            with self._pool_lock(name):
                with self._lock:
                    pool = self.pools.pop(name, None) if forget else self.pools.get(name)
                if pool is not None:
                    act(pool)

    def pause(self) -> None:
        self._each(lambda pool: pool.pause())

    def close(self) -> None:
        self._each(lambda pool: pool.close(), forget=True)
