"""Worker side of JAX data parallelism: one process, a Mesh over N devices, the global batch
sharded along its first axis, parameters replicated, one jit-compiled SGD step. The SPMD
partitioner inserts the gradient all-reduce itself (counted in the compiled HLO as evidence).

On CPU the N devices come from XLA_FLAGS=--xla_force_host_platform_device_count=N, which
XLA reads once when the backend starts: the launcher sets it in the environment of a fresh
interpreter before this module (and so jax) is imported. The parent names this module by
string and never imports it.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from pytest_mlbench.distributed.losses import load_loss
from pytest_mlbench.frameworks.base import TraceCounter

PLATFORMS = {"cpu": "cpu", "gpu": "gpu", "tpu": "tpu"}


def _make_loss(loss_fn: Any, reduction: str, shards: int) -> Any:
    """``mean``: the loss over the global batch, whose gradient the compiler all-reduces.
    ``sum``: per-shard mean losses summed, i.e. gradients summed instead of averaged: the
    wrong reduction the tests must catch."""
    if reduction == "mean":
        return loss_fn
    if reduction != "sum":
        raise ValueError(f"unknown reduction {reduction!r}")

    def summed(p: Any, **batch: Any) -> Any:
        parts = {k: jnp.split(v, shards) for k, v in batch.items()}
        return sum(loss_fn(p, **{k: parts[k][i] for k in batch}) for i in range(shards))

    return summed


class JaxDP:
    """Answers ``params``, ``steps``, ``time``, ``traces``, ``info`` and ``ping``."""

    def __init__(self, rank: int, world: int, config: dict[str, Any]) -> None:
        jax.config.update("jax_enable_x64", False)  # fp32 policy, as the adapter sets it
        jax.config.update("jax_default_matmul_precision", "highest")
        n = config["workers"]
        devices = jax.devices(PLATFORMS[config["device"]])
        if len(devices) < n:
            raise RuntimeError(f"jax sees {len(devices)} {config['device']} device(s), needs {n}"
                               " (on CPU, XLA_FLAGS was set after jax initialised?)")
        mesh = Mesh(np.array(devices[:n]), ("batch",))
        replicated = NamedSharding(mesh, PartitionSpec())
        sharded = NamedSharding(mesh, PartitionSpec("batch"))
        loss = _make_loss(load_loss(config), config["reduction"], n)
        lr = config["learning_rate"]

        def sgd_step(p: Any, batch: Any) -> Any:
            value, g = jax.value_and_grad(lambda q: loss(q, **batch))(p)
            return value, jax.tree.map(lambda w, gw: w - lr * gw, p, g)

        self.counter = TraceCounter(sgd_step)
        self.step_fn = jax.jit(self.counter, in_shardings=(replicated, sharded),
                               out_shardings=(replicated, replicated))
        self.p = jax.device_put(config["params"], replicated)
        self.batch = jax.device_put(config["inputs"], sharded)
        self.shards = {k: len(v.addressable_shards) for k, v in self.batch.items()}

    def step(self) -> Any:
        loss, self.p = self.step_fn(self.p, self.batch)
        return loss

    def __call__(self, command: str, payload: Any) -> Any:
        if command == "ping":
            return None
        if command == "params":
            return {k: np.asarray(v) for k, v in self.p.items()}
        if command == "steps":  # checked steps: the first compiles
            losses, times = [], []
            for _ in range(int(payload)):
                start = time.perf_counter()
                loss = self.step()
                jax.block_until_ready((loss, self.p))
                times.append(time.perf_counter() - start)
                losses.append(float(loss))
            return {"losses": losses, "times": times}
        if command == "time":  # one timed round, synchronised on the loss and the params
            start = time.perf_counter()
            for _ in range(int(payload)):
                loss = self.step()
            jax.block_until_ready((loss, self.p))
            return time.perf_counter() - start
        if command == "traces":
            return self.counter.count
        if command == "info":
            return self.info()
        raise ValueError(f"unknown command {command!r}")

    def info(self) -> dict[str, Any]:
        hlo = self.step_fn.lower(self.p, self.batch).compile().as_text() or ""
        return {"devices": [str(d) for d in self.p[next(iter(self.p))].sharding.device_set],
                "shards": self.shards, "all_reduce_ops": hlo.count(" all-reduce("),
                "jax": jax.__version__}

    def close(self) -> None:
        pass


def build(rank: int, world: int, config: dict[str, Any]) -> JaxDP:
    return JaxDP(rank, world, config)
