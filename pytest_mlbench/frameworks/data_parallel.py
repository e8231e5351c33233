"""Data-parallel training steps on the frameworks' own engines, as ordinary train-protocol
trainers, so a data-parallel case goes through exactly the checks and timing of any other.

- JAX: one process owning N devices (on CPU, XLA_FLAGS gives N host devices), a Mesh, the
  batch sharded along its first axis and the parameters replicated; the jitted step follows
  its inputs' shardings and XLA's SPMD partitioner inserts the gradient all-reduce.
- PyTorch: one process per rank, DistributedDataParallel over gloo (CPU) or NCCL (one GPU per
  rank), torch.optim.SGD; each rank holds its contiguous slice of the global batch and DDP
  averages gradients during backward.

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
    """A StepTrainer whose data is sharded over a Mesh of ``workers`` devices."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from pytest_mlbench.builders.functional import StepTrainer, sgd_step

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
    return StepTrainer(case, sgd_step(loss, jax.value_and_grad, case.learning_rate),
                       tuple(case.data))


class TorchDDP:
    """One rank of a DistributedDataParallel SGD step (train protocol)."""

    def __init__(self, case: Any, loss: Loss, dp: dict[str, Any]) -> None:
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

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
        self.opt = torch.optim.SGD(self.model.parameters(), lr=case.learning_rate)
        per = batch // workers
        device = self.device
        case.shard = lambda found: {k: v[rank * per:(rank + 1) * per].to(device)
                                    for k, v in found.items()}
        case.data = case.shard(case.data)  # this rank's shard; each step reads its own
        self.case, self.names = case, names

    def params(self) -> dict[str, Any]:
        return {k: p.detach() for k, p in zip(self.names, self.model.module.p, strict=True)}

    def hyperparameters(self) -> dict[str, float]:
        return {"lr": float(self.opt.param_groups[0]["lr"])}

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
