"""Parallel training steps on the frameworks' own distributed engines, as ordinary
train-protocol trainers, so a parallel case goes through exactly the checks and timing of any
other. The strategies and their meshes are pytest_mlbench/parallel.py's.

- JAX: one process owning N devices (on CPU, XLA_FLAGS gives N host devices) on a Mesh with
  axes ("data", "model"). The batch is sharded over "data"; parameters and optimizer state are
  placed with NamedSharding: replicated (dp), sharded over "data" along their first axis that
  divides (fsdp: GSPMD then gathers parameters for the step and reduce-scatters gradients,
  ZeRO-3), or split over "model" along the workload's tensor-parallel plan (tp, dpxtp). The
  jitted step (the spec's optimizer through optax, as builders/jax_.py builds it) keeps its
  outputs where its inputs were; XLA's SPMD partitioner inserts every collective.
- PyTorch: one process per rank over gloo (CPU) or NCCL (one GPU per rank), the spec's
  optimizer as torch.optim's own (builders/torch_.optimizer: SGD, momentum, Adam, AdamW).
  dp: DistributedDataParallel, each rank its contiguous slice of the global batch; fsdp:
  FSDP2's ``fully_shard`` on a DeviceMesh (parameters, gradients and optimizer state DTensors
  sharded along their first axis); tp and dpxtp: the plan's parameters distributed as DTensors
  (``Shard(axis)`` over the model axis, replicated over the data axis), the rest replicated,
  the batch replicated (tp) or sharded over the data axis (dpxtp); DTensor's sharding
  propagation inserts the collectives, and the data axis's gradient reduction runs in the step.

All are built from a mean loss ``loss(params, *data)`` over whatever batch or shard it is
given, params named as the spec: the implementation's ``data_parallel_loss(case)``, or one
derived from its functional loss (workloads/catalogue.py's ``data_parallel_loss``). Each
trainer says what it holds on each worker (``resident``: bytes of parameters, gradients and
optimizer state per worker), read outside the clock and checked against the strategy.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import numpy as np

from pytest_mlbench import owned
from pytest_mlbench.errors import Unavailable, Unsupported

Loss = Callable[..., Any]


def _check_batch(case: Any, workers: int) -> int:
    batch = int(next(iter(case.data.values())).shape[0])
    if batch % workers:
        raise Unsupported(f"the global batch of {batch} does not split into {workers} equal "
                          "shards")
    return batch


def jax_mesh(case: Any, loss: Loss, workers: int) -> Any:
    """A MeshTrainer over a (data, model) Mesh of ``workers`` devices laid out as the case's
    strategy says."""
    import jax
    from jax.sharding import Mesh, NamedSharding

    layout = case.id.layout
    data_n, model_n = layout.mesh
    if data_n > 1:
        _check_batch(case, data_n)
    platform = {"cpu": "cpu", "gpu": "gpu", "tpu": "tpu"}[case.id.device]
    devices = jax.devices(platform)
    if len(devices) < workers:
        raise Unavailable(f"jax sees {len(devices)} {platform} device(s), {workers} needed")
    mesh = Mesh(np.array(devices[:workers]).reshape(data_n, model_n), ("data", "model"))
    specs = {k: _partition(case, k, tuple(v.shape), layout.strategy, data_n, model_n)
             for k, v in case.params.items()}
    case.params = {k: _put(v, NamedSharding(mesh, specs[k])) for k, v in case.params.items()}
    batch = NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    case.shard = lambda found: {k: _put(v, batch) for k, v in found.items()}
    case.data = case.shard(case.data)
    return MeshTrainer(case, loss, tuple(case.data), mesh)


def _partition(case: Any, name: str, shape: tuple[int, ...], strategy: str, data_n: int,
               model_n: int) -> Any:
    """Where parameter ``name`` lives on the mesh: replicated (dp, and what the plan does not
    name); fsdp, over "data" along its first axis that divides (a parameter with none stays
    whole on every device); tp and dpxtp, over "model" along the plan's axis."""
    from jax.sharding import PartitionSpec

    axes: list[str | None] = [None] * len(shape)
    if strategy == "fsdp":
        axis = next((i for i, n in enumerate(shape) if n % data_n == 0), None)
        if axis is not None:
            axes[axis] = "data"
    elif strategy in ("tp", "dpxtp"):
        axis = case.id.workload.split_axis(name)
        if axis is not None:
            if axis >= len(shape) or shape[axis] % model_n:
                raise Unsupported(f"the tensor-parallel plan splits {name} {shape} along axis "
                                  f"{axis}, which does not divide into {model_n} equal parts")
            axes[axis] = "model"
    return PartitionSpec(*axes)


def _put(value: Any, sharding: Any) -> Any:
    """``value`` (the same on every process) placed with ``sharding``: each process makes
    the shards its own devices hold, as a multi-process job must."""
    import jax

    if jax.process_count() == 1:
        return jax.device_put(value, sharding)
    host = np.asarray(value)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def _placed(tree: Any, mesh: Any) -> Any:
    """``tree`` with every array that is not already on the mesh (optax's step count)
    replicated on it: a committed state, placed where the step's outputs will be."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    replicated = NamedSharding(mesh, PartitionSpec())
    return jax.tree.map(lambda a: a if isinstance(getattr(a, "sharding", None), NamedSharding)
                        else _put(a, replicated), tree)


def jax_resident(tree: Any, devices: list[Any]) -> list[int]:
    """Bytes of ``tree``'s arrays held on each of ``devices`` (this process's)."""
    import jax

    held = dict.fromkeys(devices, 0)
    for leaf in jax.tree.leaves(tree):
        for shard in getattr(leaf, "addressable_shards", ()):
            if shard.device in held:
                held[shard.device] += int(shard.data.nbytes)
    return list(held.values())


COLLECTIVE_STEPS = 3  # steps profiled for the time in collectives (after timing)
XLA_COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute",
                   "all-to-all")


def jax_collective_share(run: Callable[[], Any], steps: int, devices: int) -> list[float]:
    """The share of a step each of this process's ``devices`` spent in XLA's collective ops
    (all-reduce, all-gather, reduce-scatter, ...: their events in jax.profiler's trace of
    ``steps`` calls of ``run``, waiting for peers included, over the steps' wall time under
    the profiler), the same figure for each."""
    import glob
    import time

    import jax

    folder = owned.mkdtemp("mlbench-xla-trace-", "a JAX profiler trace, read and removed")
    try:
        jax.profiler.start_trace(folder)
        try:
            start = time.perf_counter()
            for _ in range(steps):
                jax.block_until_ready(run())
            wall = time.perf_counter() - start
        finally:
            jax.profiler.stop_trace()
        total = 0
        for path in glob.glob(f"{folder}/**/*.xplane.pb", recursive=True):
            for plane in jax.profiler.ProfileData.from_file(path).planes:
                for line in plane.lines:
                    total += sum(e.duration_ns for e in line.events
                                 if e.name.split(".")[0].removesuffix("-start")
                                 .removesuffix("-done") in XLA_COLLECTIVES)
    finally:
        owned.discard(folder)
    return [min(1.0, total / 1e9 / max(devices, 1) / wall)] * devices


def torch_collective_share(run: Callable[[], Any], steps: int) -> list[float]:
    """The share of a step this rank spent in collectives, waiting for peers included, over
    the steps' wall time under the profiler, from ``steps`` calls of ``run``: on CPU, the
    process group's own work events (``gloo:all_reduce``, ``gloo:all_gather``, ...) in
    torch's profiler without kineto (kineto's activity profiler crashed a DDP worker of gpt
    with SIGSEGV once in a main job); on a GPU, NCCL's kernels in kineto's CUDA activity."""
    import time

    import torch
    from torch.autograd import profiler

    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    if cuda:
        from torch.profiler import ProfilerActivity, profile

        recorder: Any = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    else:
        recorder = profiler.profile(use_kineto=False)
    with recorder as prof:
        start = time.perf_counter()
        for _ in range(steps):
            run()
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
        if not cuda:
            _drain_gloo()
    events = prof.key_averages()
    if cuda:
        total = sum(e.device_time_total for e in events if "nccl" in e.key.lower())
    else:
        total = sum(e.cpu_time_total for e in events  # the drain's barriers: not the step's
                    if e.key.startswith("gloo:") and "barrier" not in e.key)
    return [min(1.0, total / 1e6 / wall)]


def _drain_gloo() -> None:
    """Return once every gloo work this rank started has finished, its profiler record
    included. gloo completes a work's future before its thread closes the work's profiler
    event (``Work::finish``), so a step that waited on its all-reduces (DDP's buckets,
    FSDP's gathers) could leave the profiler while a gloo thread was about to write to it:
    rank processes died in ``profile.__exit__`` with SIGSEGV, or glibc's "free(): invalid next
    size", about one profiled window in thirty. A gloo barrier completes only after the work
    queued or running before it on its process group has finished, so one on every group the
    rank's collectives use (the world and each mesh's, in the same order on every rank)
    closes that window."""
    import torch.distributed as dist

    groups = [dist.group.WORLD] + [mesh.get_group(dim) for mesh in _MESHES.values()
                                   for dim in range(mesh.ndim)]
    for group in groups:
        dist.barrier(group=group)


class MeshTrainer:
    """The spec's optimizer step on a flat dict of parameters (train protocol), through optax
    as builders/jax_.py runs it: one function passed through ``case.compile`` that returns the
    gradients too, so loss_and_grads checks the very function that is timed."""

    def __init__(self, case: Any, loss: Loss, data_keys: tuple[str, ...], mesh: Any) -> None:
        import jax
        import optax
        from jax.sharding import NamedSharding, PartitionSpec

        from pytest_mlbench.builders.jax_ import transformation

        self.case, self.data_keys, self.p, self.mesh = case, data_keys, dict(case.params), mesh
        tx = transformation(case.optimizer, case.dtype)
        # optax's slots are made like the parameters (sharded as they are), its count placed
        # on the mesh: the state is committed where the step's outputs are
        self.opt_state = _placed(tx.init(self.p), mesh)
        grads = jax.value_and_grad(loss)
        keep = jax.tree.map(lambda a: a.sharding, (self.p, self.opt_state))

        def train_step(p: Any, opt_state: Any, *data: Any) -> Any:
            value, g = grads(p, *data)
            updates, opt_state = tx.update(g, opt_state, p)
            # parameters and state stay where they were placed (GSPMD would otherwise be free
            # to choose): a sharded case stays sharded from step to step
            p, opt_state = jax.lax.with_sharding_constraint(
                (optax.apply_updates(p, updates), opt_state), keep)
            return value, jax.lax.with_sharding_constraint(g, keep[0]), p, opt_state

        self.train_step = case.compile(train_step)
        self.last_grads: Any = None
        # several processes: what the checks read is gathered whole into every process
        # (outside the clock), as framework arrays; one process can read its shards itself
        whole = NamedSharding(mesh, PartitionSpec())
        self.whole = (jax.jit(lambda tree: tree, out_shardings=whole)
                      if jax.process_count() > 1 else (lambda tree: tree))

    @property
    def data(self) -> tuple[Any, ...]:
        """The batch of the step being called (Case.batch), in ``data_keys`` order."""
        found = self.case.batch()
        return tuple(found[k] for k in self.data_keys)

    def params(self) -> dict[str, Any]:
        return dict(self.whole(self.p))

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        value, g, _, _ = self.train_step(self.p, self.opt_state, *self.data)
        self.last_grads = g
        return value, dict(self.whole(g))

    def step(self) -> Any:
        value, _, self.p, self.opt_state = self.train_step(self.p, self.opt_state, *self.data)
        return value

    def state(self) -> dict[str, Any]:
        from pytest_mlbench.builders.jax_ import optax_state

        return optax_state(self.whole(self.opt_state))

    def hyperparameters(self) -> dict[str, float]:
        from pytest_mlbench.builders.jax_ import optax_hyperparameters

        return optax_hyperparameters(self.opt_state)

    def resident(self) -> dict[str, list[int]]:
        """Bytes held on each device of the mesh: parameters, optimizer state, and the
        gradients as the step returns them (after a loss_and_grads)."""
        import jax

        devices = [d for d in self.mesh.devices.flat if d.process_index == jax.process_index()]
        out = {"params": jax_resident(self.p, devices),
               "optimizer_state": jax_resident(self.opt_state, devices)}
        if self.last_grads is not None:
            out["grads"] = jax_resident(self.last_grads, devices)
        return out

    def collectives(self, steps: int = COLLECTIVE_STEPS) -> list[float]:
        """The share of a step in collectives, per device of this process (the whole step:
        the gradient reduction and the parameters' gathers alike)."""
        import jax

        return jax_collective_share(lambda: self.train_step(self.p, self.opt_state,
                                                              *self.data)[0],
                                      steps, sum(d.process_index == jax.process_index()
                                                 for d in self.mesh.devices.flat))


class TorchRank:
    """What every torch parallel trainer of one rank shares (train protocol): subclasses hold
    ``case``, ``names``, ``opt``, their parameters (``_parameters``, in ``names`` order) and a
    forward and backward whose collectives are the strategy's (``_forward_backward``). What the
    checks read is gathered outside the clock (``_gathered``: a DTensor whole, a plain tensor
    as it is)."""

    case: Any
    names: list[str]
    opt: Any

    def _parameters(self) -> list[Any]:
        raise NotImplementedError

    def _forward_backward(self) -> Any:
        raise NotImplementedError

    def _named(self) -> dict[str, Any]:
        return dict(zip(self.names, self._parameters(), strict=True))

    def params(self) -> dict[str, Any]:
        return {k: _gathered(p.detach()) for k, p in self._named().items()}

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        loss = self._forward_backward()
        return loss, {k: _gathered(p.grad) for k, p in self._named().items()}

    def step(self) -> Any:
        loss = self._forward_backward()
        self.opt.step()
        return loss

    def state(self) -> dict[str, Any]:
        from pytest_mlbench.builders.torch_ import optimizer_state

        found = optimizer_state(self.opt, self.case.optimizer, self._named())
        return {k: _gathered(v) for k, v in found.items()}

    def hyperparameters(self) -> dict[str, float]:
        from pytest_mlbench.builders.torch_ import optimizer_hyperparameters

        return optimizer_hyperparameters(self.opt, self.case.optimizer)

    def resident(self) -> dict[str, list[int]]:
        return torch_resident(self._parameters(), self.opt)

    def collectives(self, steps: int = COLLECTIVE_STEPS) -> list[float]:
        """The forward and backward's collectives (the optimizer's step makes none)."""
        return torch_collective_share(self._forward_backward, steps)


class TorchDDP(TorchRank):
    """One rank of a DistributedDataParallel step of the spec's optimizer (train protocol);
    the ``jit`` variant runs the DDP model under torch.compile (``case.compile``: dynamo splits
    the graph at DDP's bucket boundaries so the all-reduces overlap the backward), the
    optimizer's step eager, as torch's DDP tutorial does."""

    def __init__(self, case: Any, loss: Loss, dp: dict[str, Any]) -> None:
        import torch
        from torch.nn.parallel import DistributedDataParallel

        from pytest_mlbench.builders.torch_ import optimizer

        workers, rank = dp["workers"], case.rank
        batch = _check_batch(case, workers)
        cuda = case.id.device == "gpu"
        local = _join(dp, rank, cuda)
        self.device = torch.device(f"cuda:{local}" if cuda else "cpu")
        names = sorted(case.params)
        module = _Functional(loss, names, [case.params[k].to(self.device) for k in names])
        self.model = DistributedDataParallel(module, device_ids=[local] if cuda else None)
        self.forward = case.compile(self.model) if case.mode != "eager" else self.model
        self.opt = optimizer(case.optimizer, list(self.model.module.p))
        per = batch // workers
        device = self.device
        case.shard = lambda found: {k: v[rank * per:(rank + 1) * per].to(device)
                                    for k, v in found.items()}
        case.data = case.shard(case.data)  # this rank's shard; each step reads its own
        self.case, self.names = case, names

    def _parameters(self) -> list[Any]:
        return list(self.model.module.p)

    def _forward_backward(self) -> Any:
        self.opt.zero_grad(set_to_none=True)
        loss = self.forward(*self.case.batch().values())
        loss.backward()  # DDP's hooks all-reduce the gradient buckets here
        return loss.detach()


def torchrun_environment(rank: int, dp: dict[str, Any]) -> dict[str, str]:
    """What torchrun sets in each process it starts, for ``rank`` of the pool's ``workers``
    in ``nodes`` groups: global and local rank, the node's rank (GROUP_RANK), sizes, and the
    rendezvous store's address."""
    per = dp["workers"] // dp["nodes"]
    return {"RANK": str(rank), "WORLD_SIZE": str(dp["workers"]), "LOCAL_RANK": str(rank % per),
            "LOCAL_WORLD_SIZE": str(per), "GROUP_RANK": str(rank // per),
            "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(dp["workers"]),
            "MASTER_ADDR": dp["master_addr"], "MASTER_PORT": str(dp["master_port"])}


def _join(dp: dict[str, Any], rank: int, cuda: bool) -> int:
    """This rank in the job's process group (made once per worker process, by its first
    parallel case), through torch's ``env://`` rendezvous from torchrun's environment, as a
    process torchrun started on a node of a cluster joins: the pool plays torchrun's part
    and sets that environment here. Returns the local rank (its GPU on a node)."""
    import os

    import torch
    import torch.distributed as dist

    env = torchrun_environment(rank, dp)
    local = int(env["LOCAL_RANK"])
    if cuda:
        if torch.cuda.device_count() < int(env["LOCAL_WORLD_SIZE"]):
            raise Unavailable(f"{env['LOCAL_WORLD_SIZE']} GPUs a node needed, "
                              f"{torch.cuda.device_count()} visible")
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        os.environ.update(env)
        dist.init_process_group("nccl" if cuda else "gloo", init_method="env://",
                                timeout=timedelta(seconds=dp["timeout_s"]))
    return local


_MESHES: dict[tuple[Any, ...], Any] = {}


def _device_mesh(kind: str, shape: tuple[int, ...], names: tuple[str, ...]) -> Any:
    """A DeviceMesh over the whole process group, made once per shape: its sub-groups are
    collectives every rank must make in the same order, and every rank builds the same cases
    in the same order."""
    from torch.distributed.device_mesh import init_device_mesh

    key = (kind, shape, names)
    if key not in _MESHES:
        _MESHES[key] = init_device_mesh(kind, shape, mesh_dim_names=names)
    return _MESHES[key]


def _local_bytes(t: Any) -> int:
    """Bytes of ``t`` held by this process: a DTensor's local shard, a tensor's own."""
    local = t.to_local() if hasattr(t, "to_local") else t
    return int(local.numel() * local.element_size())


def torch_resident(params: Any, opt: Any) -> dict[str, list[int]]:
    """This rank's bytes of parameters, gradients and optimizer state (one entry: a rank is a
    process)."""
    import torch

    ps = list(params)
    state = [v for p in ps for v in opt.state.get(p, {}).values()
             if isinstance(v, torch.Tensor) and v.dim() > 0]
    return {"params": [sum(_local_bytes(p) for p in ps)],
            "grads": [sum(_local_bytes(p.grad) for p in ps if p.grad is not None)],
            "optimizer_state": [sum(_local_bytes(v) for v in state)]}


def _gathered(value: Any) -> Any:
    """A DTensor as the whole tensor (an all-gather: every rank calls it, outside the clock);
    anything else as it is."""
    return value.full_tensor() if hasattr(value, "full_tensor") else value


class TorchSharded(TorchRank):
    """One rank of a sharded step (fsdp, tp, dpxtp) of the spec's optimizer (train protocol):
    parameters, their gradients and optimizer state are DTensors; what the checks read is
    gathered outside the clock."""

    def __init__(self, case: Any, loss: Loss, dp: dict[str, Any]) -> None:
        import torch
        from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

        from pytest_mlbench.builders.torch_ import optimizer

        layout, rank, workers = case.id.layout, case.rank, dp["workers"]
        data_n, model_n = layout.mesh
        batch = _check_batch(case, data_n) if data_n > 1 else 0
        cuda = case.id.device == "gpu"
        local = _join(dp, rank, cuda)
        self.device = device = torch.device(f"cuda:{local}" if cuda else "cpu")
        kind = "cuda" if cuda else "cpu"
        names = sorted(case.params)
        values = [case.params[k].to(device) for k in names]
        self.strategy = layout.strategy
        if layout.strategy == "fsdp":
            from torch.distributed.fsdp import fully_shard

            mesh = _device_mesh(kind, (workers,), ("data",))
            module = _Functional(loss, names, values)
            fully_shard(module, mesh=mesh)  # every parameter a DTensor, Shard(0) over data
            self.p = list(module.p)
            self.module: Any = module
            per = batch // data_n
            case.shard = lambda found: {k: v[rank * per:(rank + 1) * per].to(device)
                                        for k, v in found.items()}
        else:
            two_d = layout.strategy == "dpxtp"
            mesh = (_device_mesh(kind, (data_n, model_n), ("data", "model")) if two_d
                    else _device_mesh(kind, (model_n,), ("model",)))

            def placements(name: str, shape: tuple[int, ...]) -> list[Any]:
                axis = case.id.workload.split_axis(name)
                if axis is not None and (axis >= len(shape) or shape[axis] % model_n):
                    raise Unsupported(f"the tensor-parallel plan splits {name} {shape} along "
                                      f"axis {axis}, which does not divide into {model_n} "
                                      "equal parts")
                on_model = Replicate() if axis is None else Shard(axis)
                return [Replicate(), on_model] if two_d else [on_model]

            self.p = [torch.nn.Parameter(distribute_tensor(
                v.clone(), mesh, placements(k, tuple(v.shape)))) for k, v in zip(names, values,
                                                                                 strict=True)]
            self.module = None
            if two_d:
                coord = mesh.get_coordinate()[0]  # this rank's place on the data axis
                per = batch // data_n
                along = [Shard(0), Replicate()]
                case.shard = lambda found: {
                    k: DTensor.from_local(v[coord * per:(coord + 1) * per].to(device), mesh,
                                          along) for k, v in found.items()}
            else:
                case.shard = lambda found: {k: v.to(device) for k, v in found.items()}
            self.loss = loss
        self.opt = optimizer(case.optimizer, self.p)
        case.data = case.shard(case.data)
        self.case, self.names = case, names

    def _parameters(self) -> list[Any]:
        return list(self.p)

    def _forward_backward(self) -> Any:
        from torch.distributed.tensor.experimental import implicit_replication

        self.opt.zero_grad(set_to_none=True)
        batch = self.case.batch().values()
        if self.module is not None:  # FSDP2: gathers in its forward, reduce-scatters in backward
            loss = self.module(*batch)
            loss.backward()
            return loss.detach()
        with implicit_replication():  # a tensor the loss makes itself counts as replicated
            loss = self.loss(self._named(), *batch)
            loss.backward()
            for p in self.p:  # the data axis's reduction: a partial sum becomes the param's
                if p.grad is not None and p.grad.placements != p.placements:
                    p.grad = p.grad.redistribute(p.device_mesh, p.placements)
        return loss.detach().full_tensor()


_STRATEGIES: dict[tuple[str, ...], Any] = {}


def _mirrored(devices: tuple[str, ...]) -> Any:
    """One MirroredStrategy a process per set of devices: each strategy numbers its
    collectives from the same keys, and two in one process clash (a collective of one case's
    shapes meets another's)."""
    import tensorflow as tf

    if devices not in _STRATEGIES:
        _STRATEGIES[devices] = tf.distribute.MirroredStrategy(list(devices))
    return _STRATEGIES[devices]


class TFMirrored:
    """TensorFlow's data parallelism on one host (``tf.distribute.MirroredStrategy``) over N
    devices of one process: on a CPU host, N logical CPU devices the worker made as it started
    (``join_at_start``). Variables are MirroredVariables, the spec's optimizer Keras's own made
    in the strategy's scope; each replica steps on its contiguous slice of the global batch,
    its mean loss divided by the replicas, and Keras's ``apply`` sums the gradients over the
    replicas (an all-reduce) before every replica applies the same update."""

    def __init__(self, case: Any, loss: Loss, dp: dict[str, Any]) -> None:
        import tensorflow as tf

        from pytest_mlbench.builders.tensorflow_ import optimizer

        n = dp["workers"]
        batch = _check_batch(case, n)
        kind = "GPU" if case.id.device == "gpu" else "CPU"
        devices = tf.config.list_logical_devices(kind)
        if len(devices) < n:
            raise Unavailable(f"tensorflow sees {len(devices)} {kind} device(s), {n} needed")
        self.strategy = strategy = _mirrored(tuple(d.name for d in devices[:n]))
        self.names = names = sorted(case.params)
        with strategy.scope():
            self.variables = [tf.Variable(case.params[k]) for k in names]
            self.opt = optimizer(case.optimizer, case.dtype)
            self.opt.build(self.variables)
        per = batch // n

        def shard(found: dict[str, Any]) -> dict[str, Any]:
            def mine(ctx: Any) -> dict[str, Any]:
                r = ctx.replica_id_in_sync_group
                return {k: v[r * per:(r + 1) * per] for k, v in found.items()}

            return strategy.experimental_distribute_values_from_function(mine)

        case.shard = shard
        case.data = shard(case.data)
        self.case, self.replicas, self.loss = case, n, loss
        self._grads = case.compile(lambda data: self._each(self._evaluate, data))
        self._step = case.compile(lambda data: self._each(self._update, data))

    def _each(self, fn: Callable[..., Any], data: Any) -> Any:
        """``fn`` on every replica; its all-reduced results, as the first replica holds them."""
        import tensorflow as tf

        found = self.strategy.run(fn, args=(data,))
        return tf.nest.map_structure(lambda x: self.strategy.experimental_local_results(x)[0],
                                     found)

    def _value_and_grads(self, data: Any) -> Any:
        import tensorflow as tf

        with tf.GradientTape() as tape:
            value = self.loss(dict(zip(self.names, self.variables, strict=True)),
                              *data.values()) / self.replicas
        return value, tape.gradient(value, self.variables)

    def _evaluate(self, data: Any) -> Any:
        import tensorflow as tf

        value, grads = self._value_and_grads(data)
        ctx = tf.distribute.get_replica_context()
        return ctx.all_reduce("SUM", value), ctx.all_reduce("SUM", grads)

    def _update(self, data: Any) -> Any:
        import tensorflow as tf

        value, grads = self._value_and_grads(data)
        self.opt.apply(grads, self.variables)  # Keras all-reduces (sums) across replicas
        return tf.distribute.get_replica_context().all_reduce("SUM", value)

    def params(self) -> dict[str, Any]:
        return {k: v.read_value() for k, v in zip(self.names, self.variables, strict=True)}

    def loss_and_grads(self) -> tuple[Any, dict[str, Any]]:
        value, grads = self._grads(self.case.batch())
        return value, dict(zip(self.names, grads, strict=True))

    def step(self) -> Any:
        return self._step(self.case.batch())

    def state(self) -> dict[str, Any]:
        from pytest_mlbench.builders.tensorflow_ import optimizer_state

        return optimizer_state(self.opt, self.case.optimizer, self.variables[0].dtype,
                               lambda slots: {k: s.read_value() if hasattr(s, "read_value")
                                              else s for k, s in zip(self.names, slots,
                                                                     strict=True)})

    def hyperparameters(self) -> dict[str, float]:
        from pytest_mlbench.builders.tensorflow_ import optimizer_hyperparameters

        return optimizer_hyperparameters(self.opt)

    def resident(self) -> dict[str, list[int]]:
        """Bytes each replica's device holds: every MirroredVariable has a copy on each."""
        import keras

        def per_device(variables: list[Any]) -> list[int]:
            held = [0] * self.replicas
            for v in variables:
                inner = v.value if isinstance(v, keras.Variable) else v  # its tf.Variable
                for i, copy in enumerate(getattr(inner, "values", (inner,))[:self.replicas]):
                    dtype = np.dtype(getattr(copy.dtype, "name", copy.dtype))
                    held[i] += int(np.prod(copy.shape)) * dtype.itemsize
            return held

        state = [v for v in self.opt.variables if len(v.shape) > 0]
        return {"params": per_device(self.variables), "optimizer_state": per_device(state)}


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
