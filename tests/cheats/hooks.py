"""The session's conftest.py: JAX and torch adapters whose parallel trainers cheat for the
workloads named below (through the pytest_mlbench_adapters hook, as a user's conftest could)
and behave as the built-in ones for every other case:

- dpshard (JAX): after the checked steps, the Mesh step runs on half of the global batch;
- fsdpwhole (both): claims fsdp, runs the replicated data-parallel engine (right numbers,
  nothing sharded);
- fsdpstate (JAX): parameters sharded, the optimizer's state placed whole on every device;
- fsdpstale (torch): after the checked steps, rank 1 puts its shard back as it was before
  each optimizer step, so the all-gather reads a stale shard;
- fsdpnosync (torch): after the checked steps, every rank turns FSDP2's gradient
  reduce-scatter off (``set_requires_gradient_sync(False)``);
- fsdpswap (torch): after the checked steps, rank 1's shards are overwritten with rank 0's
  after every step (a broadcast from rank 0): the all-gather reads rank 0's rows twice;
- dpsum (TensorFlow): MirroredStrategy with each replica's loss left undivided by the
  replicas, so Keras's sum over replicas doubles the gradient;
- nodekill (both): after the checked steps, rank 1 kills its own process (SIGKILL) in its
  first timed step, while the other rank waits for it in a collective."""

from __future__ import annotations

import dataclasses
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file, sgd_step
from pytest_mlbench.frameworks import distributed
from pytest_mlbench.frameworks.jax_ import JaxAdapter
from pytest_mlbench.frameworks.tensorflow_ import TensorflowAdapter
from pytest_mlbench.frameworks.torch_ import TorchAdapter

SPECS = load_suite_file(Path(__file__).parent / "suites" / "specs.py")


def as_dp(case: Any, build: Callable[[], Any]) -> Any:
    """``build()`` run while the case says dp: the replicated engine behind an fsdp id."""
    claimed = case.id
    case.id = dataclasses.replace(claimed, strategy="dp")
    try:
        return build()
    finally:
        case.id = claimed


class StaleShard:
    """A sharded torch trainer whose rank 1, after the checked steps, restores its local
    shards to what they were before each step."""

    def __init__(self, inner: Any, rank: int) -> None:
        self.inner, self.rank, self.calls = inner, rank, 0
        for name in ("params", "loss_and_grads", "state", "hyperparameters", "resident"):
            setattr(self, name, getattr(inner, name))

    def step(self) -> Any:
        self.calls += 1
        if self.calls <= SPECS.CHECKED or self.rank != 1:
            return self.inner.step()
        kept = [p.to_local().detach().clone() for p in self.inner.p]
        loss = self.inner.step()
        for p, old in zip(self.inner.p, kept, strict=True):
            p.to_local().detach().copy_(old)
        return loss


class NoSync(StaleShard):
    """FSDP2 with its reduce-scatter turned off on every rank once the checks are over."""

    def step(self) -> Any:
        self.calls += 1
        if self.calls == SPECS.CHECKED + 1:
            self.inner.module.set_requires_gradient_sync(False)
        return self.inner.step()


class SwappedShard(StaleShard):
    """Rank 1's local shards replaced by rank 0's after every step past the checks."""

    def step(self) -> Any:
        import torch.distributed as dist

        self.calls += 1
        loss = self.inner.step()
        if self.calls > SPECS.CHECKED:
            for p in self.inner.p:
                local = p.to_local().detach()
                got = local.clone()
                dist.broadcast(got, src=0)
                if self.rank == 1:
                    local.copy_(got)
        return loss


TORCH_CHEATS = {"fsdpstale": StaleShard, "fsdpnosync": NoSync, "fsdpswap": SwappedShard}


class KillRankOne:
    """A parallel trainer whose rank 1 process is killed at its first step after the checks."""

    def __init__(self, inner: Any, rank: int) -> None:
        self.inner, self.rank, self.calls = inner, rank, 0
        for name in ("params", "loss_and_grads", "state", "hyperparameters", "resident"):
            if hasattr(inner, name):
                setattr(self, name, getattr(inner, name))

    def step(self) -> Any:
        self.calls += 1
        if self.calls > SPECS.CHECKED and self.rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.inner.step()


def wrapped(case: Any, trainer: Any) -> Any:
    """The cheats every framework shares, by workload name."""
    if case.id.workload.name == "nodekill":
        return KillRankOne(trainer, case.rank)
    return trainer


class CheatingTorch(TorchAdapter):
    def parallel(self, case: Any, loss: Any, dp: dict[str, Any]) -> Any:
        name = case.id.workload.name
        if name == "fsdpwhole":
            return as_dp(case, lambda: super(CheatingTorch, self).parallel(case, loss, dp))
        trainer = super().parallel(case, loss, dp)
        cheat = TORCH_CHEATS.get(name)
        return cheat(trainer, case.rank) if cheat else wrapped(case, trainer)


class CheatingJax(JaxAdapter):
    def parallel(self, case: Any, loss: Any, dp: dict[str, Any]) -> Any:
        """The built-in Mesh trainer; dpshard's, after the checked steps, steps on the first
        half of the global batch through a second jitted step warmed up here."""
        name = case.id.workload.name
        if name == "fsdpwhole":
            return as_dp(case, lambda: super(CheatingJax, self).parallel(case, loss, dp))
        if name == "fsdpstate":
            import jax
            from jax.sharding import NamedSharding, PartitionSpec

            placed = distributed._placed
            distributed._placed = lambda tree, mesh: jax.device_put(
                tree, NamedSharding(mesh, PartitionSpec()))
            try:
                return super().parallel(case, loss, dp)
            finally:
                distributed._placed = placed
        trainer = super().parallel(case, loss, dp)
        if name != "dpshard":
            return wrapped(case, trainer)
        import jax

        half = jax.jit(sgd_step(loss, jax.value_and_grad, case.learning_rate))
        return SPECS.HalfBatch(trainer, half, warm=jax.block_until_ready)


class CheatingTensorflow(TensorflowAdapter):
    def parallel(self, case: Any, loss: Any, dp: dict[str, Any]) -> Any:
        trainer = super().parallel(case, loss, dp)
        if case.id.workload.name == "dpsum":
            trainer.replicas = 1  # read as its steps are traced: the loss not divided
        return trainer


def pytest_mlbench_adapters(config: Any) -> dict[str, Any]:
    return {"jax": CheatingJax, "torch": CheatingTorch, "tensorflow": CheatingTensorflow}
