"""The session's conftest.py: JAX and torch adapters whose parallel trainers cheat for the
workloads named below (through the pytest_mlbench_adapters hook, as a user's conftest could)
and behave as the built-in ones for every other case:

- dpshard (JAX): after the checked steps, the Mesh step runs on half of the global batch;
- fsdpwhole (both): claims fsdp, runs the replicated data-parallel engine (right numbers,
  nothing sharded);
- fsdpstate (JAX): parameters sharded, the optimizer's state placed whole on every device;
- fsdpstale (torch): after the checked steps, rank 1 puts its shard back as it was before
  each optimizer step, so the all-gather reads a stale shard."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_mlbench import load_suite_file, sgd_step
from pytest_mlbench.frameworks import distributed
from pytest_mlbench.frameworks.jax_ import JaxAdapter
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


class CheatingTorch(TorchAdapter):
    def parallel(self, case: Any, loss: Any, dp: dict[str, Any]) -> Any:
        name = case.id.workload.name
        if name == "fsdpwhole":
            return as_dp(case, lambda: super(CheatingTorch, self).parallel(case, loss, dp))
        trainer = super().parallel(case, loss, dp)
        return StaleShard(trainer, case.rank) if name == "fsdpstale" else trainer


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
            return trainer
        import jax

        half = jax.jit(sgd_step(loss, jax.value_and_grad, case.learning_rate))
        return SPECS.HalfBatch(trainer, half, warm=jax.block_until_ready)


def pytest_mlbench_adapters(config: Any) -> dict[str, Any]:
    return {"jax": CheatingJax, "torch": CheatingTorch}
