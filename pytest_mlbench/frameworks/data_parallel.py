"""Data-parallel training steps on the frameworks' own engines, as ordinary train-protocol
trainers, so a data-parallel case goes through exactly the checks and timing of any other.

- JAX: one process owning N devices (on CPU, XLA_FLAGS gives N host devices), a Mesh, the
  batch sharded along its first axis and the parameters and optimizer state replicated; the
  jitted step (the spec's optimizer through optax, as builders/jax_.py builds it) follows its
  inputs' shardings and XLA's SPMD partitioner inserts the gradient all-reduce.
- PyTorch: one process per rank, DistributedDataParallel over gloo (CPU) or NCCL (one GPU per
  rank), the spec's optimizer as torch.optim's own (builders/torch_.optimizer: SGD, momentum,
  Adam, AdamW); each rank holds its contiguous slice of the global batch and DDP averages
  gradients during backward, so every rank takes the same optimizer step.

Both are built from a mean loss ``loss(params, *data)`` over whatever batch or shard it is
given, params named as the spec: the implementation's ``data_parallel_loss(case)``, or one
derived from its functional loss (workloads/catalogue.py's ``data_parallel_loss``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import numpy as np

from pytest_mlbench.errors import Unavailable, Unsupported

Loss = Callable[..., Any]


def _check_batch(case: Any, workers: int) -> int:
    batch = int(next(iter(case.data.values())).shape[0])
    if batch % workers:
        raise Unsupported(f"the global batch of {batch} does not split into {workers} equal "
                          "shards")
    return batch


def jax_mesh(case: Any, loss: Loss, workers: int) -> Any:
    """A MeshTrainer whose data is sharded over a Mesh of ``workers`` devices."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    _check_batch(case, workers)
    platform = {"cpu": "cpu", "gpu": "gpu", "tpu": "tpu"}[case.id.device]
    devices = jax.devices(platform)
    if len(devices) < workers:
        raise Unavailable(f"jax sees {len(devices)} {platform} device(s), {workers} needed")
    mesh = Mesh(np.array(devices[:workers]), ("batch",))
    replicated = NamedSharding(mesh, PartitionSpec())
    sharded = NamedSharding(mesh, PartitionSpec("batch"))
    case.params = {k: jax.device_put(v, replicated) for k, v in case.params.items()}
    case.shard = lambda batch: {k: jax.device_put(v, sharded) for k, v in batch.items()}
    case.data = case.shard(case.data)
    return MeshTrainer(case, loss, tuple(case.data))


class MeshTrainer:
    """The spec's optimizer step on a flat dict of parameters (train protocol), through optax
    as builders/jax_.py runs it: one function passed through ``case.compile`` that returns the
    gradients too, so loss_and_grads checks the very function that is timed."""

    def __init__(self, case: Any, loss: Loss, data_keys: tuple[str, ...]) -> None:
        import jax
        import optax

        from pytest_mlbench.builders.jax_ import committed, transformation

        self.case, self.data_keys, self.p = case, data_keys, dict(case.params)
        tx = transformation(case.optimizer, case.dtype)
        self.opt_state = committed(tx.init(self.p), self.p)  # replicated, like the params
        grads = jax.value_and_grad(loss)

        def train_step(p: Any, opt_state: Any, *data: Any) -> Any:
            value, g = grads(p, *data)
            updates, opt_state = tx.update(g, opt_state, p)
            return value, g, optax.apply_updates(p, updates), opt_state

        self.train_step = case.compile(train_step)

    @property
    def data(self) -> tuple[Any, ...]:
        """The batch of the step being called (Case.batch), in ``data_keys`` order."""
        found = self.case.batch()
        return tuple(found[k] for k in self.data_keys)

    def params(self) -> dict[str, Any]:
        return dict(self.p)

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        value, g, _, _ = self.train_step(self.p, self.opt_state, *self.data)
        return value, dict(g)

    def step(self) -> Any:
        value, _, self.p, self.opt_state = self.train_step(self.p, self.opt_state, *self.data)
        return value

    def state(self) -> dict[str, Any]:
        from pytest_mlbench.builders.jax_ import optax_state

        return optax_state(self.opt_state)

    def hyperparameters(self) -> dict[str, float]:
        from pytest_mlbench.builders.jax_ import optax_hyperparameters

        return optax_hyperparameters(self.opt_state)


class TorchDDP:
    """One rank of a DistributedDataParallel step of the spec's optimizer (train protocol)."""

    def __init__(self, case: Any, loss: Loss, dp: dict[str, Any]) -> None:
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        from pytest_mlbench.builders.torch_ import optimizer

        workers, rank = dp["workers"], case.rank
        batch = _check_batch(case, workers)
        cuda = case.id.device == "gpu"
        if cuda:
            if torch.cuda.device_count() < workers:
                raise Unavailable(f"{workers} GPUs needed, {torch.cuda.device_count()} visible")
            torch.cuda.set_device(rank)
        self.device = torch.device(f"cuda:{rank}" if cuda else "cpu")
        if not dist.is_initialized():
            dist.init_process_group("nccl" if cuda else "gloo", init_method=dp["init_method"],
                                    rank=rank, world_size=workers,
                                    timeout=timedelta(seconds=dp["timeout_s"]))
        names = sorted(case.params)
        module = _Functional(loss, names, [case.params[k].to(self.device) for k in names])
        self.model = DistributedDataParallel(module, device_ids=[rank] if cuda else None)
        self.opt = optimizer(case.optimizer, list(self.model.module.p))
        per = batch // workers
        device = self.device
        case.shard = lambda found: {k: v[rank * per:(rank + 1) * per].to(device)
                                    for k, v in found.items()}
        case.data = case.shard(case.data)  # this rank's shard; each step reads its own
        self.case, self.names = case, names

    def _named(self) -> dict[str, Any]:
        return dict(zip(self.names, self.model.module.p, strict=True))

    def params(self) -> dict[str, Any]:
        return {k: p.detach() for k, p in self._named().items()}

    def state(self) -> dict[str, Any]:
        from pytest_mlbench.builders.torch_ import optimizer_state

        return optimizer_state(self.opt, self.case.optimizer, self._named())

    def hyperparameters(self) -> dict[str, float]:
        from pytest_mlbench.builders.torch_ import optimizer_hyperparameters

        return optimizer_hyperparameters(self.opt, self.case.optimizer)

    def _forward_backward(self) -> Any:
        self.opt.zero_grad(set_to_none=True)
        loss = self.model(*self.case.batch().values())
        loss.backward()  # DDP's hooks all-reduce the gradient buckets here
        return loss.detach()

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        loss = self._forward_backward()
        return loss, {k: p.grad for k, p in zip(self.names, self.model.module.p, strict=True)}

    def step(self) -> Any:
        loss = self._forward_backward()
        self.opt.step()
        return loss


try:  # a Module subclass needs torch at class-definition time: only where torch exists
    import torch as _torch

    class _Functional(_torch.nn.Module):
        """The workload's functional loss over named parameters, as DDP needs a Module;
        parameters are stored by position (names may hold dots)."""

        def __init__(self, loss: Loss, names: list[str], values: list[Any]) -> None:
            super().__init__()
            self.loss, self.names = loss, names
            self.p = _torch.nn.ParameterList([_torch.nn.Parameter(v.clone()) for v in values])

        def forward(self, *batch: Any) -> Any:
            return self.loss(dict(zip(self.names, self.p, strict=True)), *batch)
except ImportError:  # pragma: no cover - torch not installed: TorchDDP is never built
    pass
