"""Parallel strategies as data: what a strategy is called, how it lays N workers out on a mesh,
and how a case's id names it. Every layer reads these (the spec, the case id, the engines, the
record), so they live in one leaf.

A mesh has two axes, ``data`` (the batch is split along it) and ``model`` (the parameters a
workload's tensor-parallel plan names are split along it):

- ``dp``: data parallel, parameters, gradients and optimizer state replicated: mesh (N, 1);
- ``fsdp``: fully sharded data parallel: the batch split as in ``dp``, and parameters,
  gradients and optimizer state sharded over the data axis (ZeRO-3): mesh (N, 1);
- ``tp``: tensor parallel: the batch replicated, the plan's parameters (and their gradients
  and optimizer state) split along the model axis: mesh (1, N);
- ``dpxtp``: both on a 2-D mesh, the batch split over data and the plan over model: mesh
  (N/2, 2), at four workers or more.

``nodes``: the workers launched as that many groups of processes, each with its own node rank,
joining one job through the frameworks' own multi-process runtimes (torch's ``env://``
rendezvous from torchrun's environment, ``jax.distributed.initialize`` with one process a
node): on one machine, a rehearsal of a multi-node launch. One node is one process group (torch)
or one process owning every device (JAX).
"""

from __future__ import annotations

from dataclasses import dataclass

# where a parallel case's workers come from: this session's own children, or workers a
# cluster launcher started that connect to it (--mlbench-hosts, engine/remote.py)
HOSTS = ("local", "external")
STRATEGIES: dict[str, str] = {
    "dp": "data parallel (parameters replicated)",
    "fsdp": "fully sharded data parallel (parameters, gradients, optimizer state sharded)",
    "tp": "tensor parallel (the workload's plan split along a model axis)",
    "dpxtp": "a 2-D mesh: data parallel x tensor parallel (model axis of 2)",
}
# what a framework's engine lacks, by strategy: its cases a workload declares skip with the
# reason (a declared gap, never a silent one)
GAPS: dict[str, dict[str, str]] = {
    "tensorflow": {
        "nodes": "TensorFlow's data parallelism here is MirroredStrategy in one process; "
                 "MultiWorkerMirroredStrategy across processes (TF_CONFIG) is not built",
        "fsdp": "tf.distribute has no fully sharded strategy (variables are mirrored or on "
                "parameter servers)",
        "tp": "tf.distribute has no tensor-parallel strategy (TensorFlow's DTensor is "
              "experimental and no longer developed)",
        "dpxtp": "tf.distribute has no tensor-parallel strategy, so no 2-D mesh",
    },
}
DECLARED = ("dp", "fsdp", "tp")  # what a spec declares; dpxtp follows from dp and tp
MODEL_AXIS_2D = 2  # the model axis of a dpxtp mesh
DPXTP_NEEDS = (f"dpxtp needs an even worker count of at least {2 * MODEL_AXIS_2D} (a model axis "
               f"of {MODEL_AXIS_2D})")


@dataclass(frozen=True)
class Layout:
    """How a case's workers are laid out: ``strategy`` "" for a single-device case."""

    strategy: str = ""
    workers: int = 1
    nodes: int = 1

    @property
    def mesh(self) -> tuple[int, int]:
        """(data, model) axis sizes."""
        n = self.workers
        if self.strategy == "tp":
            return 1, n
        if self.strategy == "dpxtp":
            return n // MODEL_AXIS_2D, MODEL_AXIS_2D
        return n, 1

    @property
    def label(self) -> str:
        """``""``, ``dp-w2``, ``fsdp-w2``, ``tp-w4``, ``dp2xtp2``: the id's and group's part."""
        if not self.strategy:
            return ""
        nodes = f"-n{self.nodes}" if self.nodes > 1 else ""
        if self.strategy == "dpxtp" and self.unfit() is None:
            data, model = self.mesh
            return f"dp{data}xtp{model}{nodes}"
        return f"{self.strategy}-w{self.workers}{nodes}"

    def unfit(self) -> str | None:
        """Why this many workers cannot run the strategy (None: they can)."""
        if self.strategy == "dpxtp" and (self.workers < 2 * MODEL_AXIS_2D
                                         or self.workers % MODEL_AXIS_2D):
            return f"{DPXTP_NEEDS}; got {self.workers}"
        if self.strategy and self.workers < 2:
            return f"{self.strategy} needs two workers or more"
        if self.nodes > 1 and (not self.strategy or self.workers % self.nodes):
            return (f"{self.workers} worker(s) do not split into {self.nodes} nodes of equal "
                    "size")
        return None

    @property
    def per_node(self) -> int:
        return self.workers // self.nodes


def refusal(workers: tuple[int, ...], strategies: tuple[str, ...], nodes: tuple[int, ...], *,
            strategies_named: bool, nodes_named: bool) -> str | None:
    """Why worker counts, strategies and node counts the user named can make no case of
    theirs at all, in one line (None: each can make one). A pair that fails beside others
    that work (two workers on three nodes, beside one node) is a case that skips naming why."""
    parallel = [w for w in workers if w > 1]
    given = ",".join(map(str, workers))
    if not parallel:
        if nodes_named and any(n > 1 for n in nodes):
            return (f"--mlbench-nodes={','.join(map(str, nodes))}: nodes split a parallel "
                    f"case's workers, and --mlbench-workers={given} makes no parallel case; "
                    "give a worker count above 1 too (such as --mlbench-workers=1,2)")
        if strategies_named:
            return (f"--mlbench-strategies={','.join(strategies)}: strategies run at worker "
                    f"counts above 1, and --mlbench-workers={given} makes no parallel case; "
                    "give a worker count above 1 too (such as --mlbench-workers=1,2)")
        return None
    for n in nodes:
        if n > 1 and not any(w % n == 0 for w in parallel):
            return (f"--mlbench-nodes={n}: no worker count given (--mlbench-workers={given}) "
                    f"splits into {n} nodes of equal size; give one that {n} divides (such as "
                    f"--mlbench-workers=1,{2 * n})")
    for strategy in strategies if strategies_named else ():
        if all(Layout(strategy, w).unfit() for w in parallel):  # dpxtp, the one with a rule
            return (f"--mlbench-strategies={strategy}: {DPXTP_NEEDS}, and --mlbench-workers="
                    f"{given} gives none; give one too (such as --mlbench-workers=1,"
                    f"{2 * MODEL_AXIS_2D})")
    return None



def holders(layout: Layout, framework: str, shape: tuple[int, ...], index: tuple[int, ...],
            split_axis: int | None) -> str:
    """Which workers hold element ``index`` of a parameter of ``shape`` under ``layout``, as
    the framework's engine places it (frameworks/distributed.py), in words: "" where every
    worker holds it (dp, a tensor the strategy keeps whole)."""
    data_n, model_n = layout.mesh
    if layout.strategy == "fsdp" and shape:
        if framework == "torch":  # FSDP2: dim 0 in chunks of ceil(rows / N), the last short
            axis, size = 0, -(-shape[0] // data_n)
        else:  # NamedSharding: the first axis that divides, in equal parts
            axis = next((a for a, n in enumerate(shape) if n % data_n == 0), -1)
            if axis < 0:
                return ""
            size = shape[axis] // data_n
        worker = index[axis] // size
        return f"worker {worker}'s shard (axis {axis}, {worker * size} to {(worker + 1) * size - 1})"
    if layout.strategy in ("tp", "dpxtp") and split_axis is not None:
        size = shape[split_axis] // model_n
        part = index[split_axis] // size
        workers = [d * model_n + part for d in range(data_n)]
        who = f"worker {workers[0]}" if len(workers) == 1 else \
            "workers " + ", ".join(map(str, workers))
        return (f"{who}'s shard on the model axis (axis {split_axis}, {part * size} to "
                f"{(part + 1) * size - 1})")
    return ""
