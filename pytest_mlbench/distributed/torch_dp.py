"""Worker side of PyTorch data parallelism: DistributedDataParallel over gloo (CPU) or NCCL
(one GPU per process), built from the workload's own ``loss_fn`` in ``impl_torch.py``.

Each rank holds its contiguous slice of the global batch; DDP averages gradients across ranks
during backward, so one step equals the single-device step on the whole batch when the slices
are equal. This module runs inside spawned workers (see launcher.py); the parent names it
by string and never imports it.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from pytest_mlbench.distributed.losses import load_loss


def _sum_hook(state, bucket):  # type: ignore[no-untyped-def]
    """All-reduce that sums instead of averaging: the wrong reduction the tests must catch.
    Unannotated on purpose: DDP rejects a hook whose ``bucket`` annotation is not literally
    dist.GradBucket, and postponed annotations would make it a string."""
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


class TorchDP:
    """One DDP rank; answers ``params``, ``steps``, ``time``, ``traces``, ``info``, ``ping``."""

    def __init__(self, rank: int, world: int, config: dict[str, Any]) -> None:
        torch.set_num_threads(config["threads"])  # the cores are shared among the ranks
        torch.set_float32_matmul_precision("highest")  # fp32 policy: no TF32
        torch.backends.cuda.matmul.allow_tf32 = False
        self.cuda = config["device"] == "gpu"
        if self.cuda:
            torch.cuda.set_device(rank)
        self.device = torch.device(f"cuda:{rank}" if self.cuda else "cpu")
        dist.init_process_group(config["backend"], init_method=config["init_method"],
                                rank=rank, world_size=world,
                                timeout=timedelta(seconds=config["collective_timeout_s"]))
        self.rank, self.world = rank, world
        self.model = self._build(config)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=config["learning_rate"])
        per = config["batch"] // world
        self.batch = {k: torch.from_numpy(np.ascontiguousarray(v[rank * per:(rank + 1) * per]))
                      .to(self.device) for k, v in config["inputs"].items()}

    def _build(self, config: dict[str, Any]) -> Any:
        module = Functional(load_loss(config), config["params"]).to(self.device)
        model = DistributedDataParallel(module, device_ids=[self.rank] if self.cuda else None)
        if config["reduction"] == "sum":
            model.register_comm_hook(None, _sum_hook)
        elif config["reduction"] != "mean":
            raise ValueError(f"unknown reduction {config['reduction']!r}")
        torch.manual_seed(config["seed"])
        return model

    def step(self) -> Any:
        self.opt.zero_grad(set_to_none=True)
        loss = self.model(**self.batch)
        loss.backward()  # DDP's hooks all-reduce the gradient buckets here
        self.opt.step()
        return loss.detach()

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def __call__(self, command: str, payload: Any) -> Any:
        if command == "ping":
            return None
        if command == "params":
            return {k: v.detach().cpu().numpy() for k, v in self.model.module.named().items()}
        if command == "steps":  # checked steps: local loss before each, wall time of each
            losses, times = [], []
            for _ in range(int(payload)):
                start = time.perf_counter()
                losses.append(float(self.step().item()))  # .item() syncs the step
                times.append(time.perf_counter() - start)
            return {"losses": losses, "times": times}
        if command == "time":  # one timed round: aligned start, synchronised end
            dist.barrier(device_ids=[self.rank] if self.cuda else None)
            start = time.perf_counter()
            for _ in range(int(payload)):
                self.step()
            self.sync()
            return time.perf_counter() - start
        if command == "traces":  # eager DDP never traces
            return 0
        if command == "info":
            return self.info()
        raise ValueError(f"unknown command {command!r}")

    def info(self) -> dict[str, Any]:
        return {"backend": dist.get_backend(), "world": dist.get_world_size(),
                "threads": torch.get_num_threads(), "torch": torch.__version__,
                "device": str(self.device)}

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


class Functional(torch.nn.Module):
    """The workload's functional loss over named parameters, as DDP needs a Module. Module
    attribute names cannot hold dots (``block0.qkv_w``), so they are stored by position and
    handed to the loss under the spec's names."""

    def __init__(self, loss_fn: Any, params: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.loss_fn, self.names = loss_fn, sorted(params)
        self.p = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.from_numpy(np.array(params[k]))) for k in self.names])

    def named(self) -> dict[str, Any]:
        return dict(zip(self.names, self.p, strict=True))

    def forward(self, **batch: Any) -> Any:
        return self.loss_fn(self.named(), **batch)


def build(rank: int, world: int, config: dict[str, Any]) -> TorchDP:
    return TorchDP(rank, world, config)
