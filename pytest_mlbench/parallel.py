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
"""

from __future__ import annotations

from dataclasses import dataclass

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
        "dp": "TensorFlow's MultiWorkerMirroredStrategy must configure its collectives as the "
              "TF runtime starts, before a worker's thread and precision set-up; this harness "
              "does not build it",
        "fsdp": "tf.distribute has no fully sharded strategy (variables are mirrored or on "
                "parameter servers)",
        "tp": "tf.distribute has no tensor-parallel strategy (TensorFlow's DTensor is "
              "experimental and no longer developed)",
        "dpxtp": "tf.distribute has no tensor-parallel strategy, so no 2-D mesh",
    },
}
DECLARED = ("dp", "fsdp", "tp")  # what a spec declares; dpxtp follows from dp and tp
MODEL_AXIS_2D = 2  # the model axis of a dpxtp mesh


@dataclass(frozen=True)
class Layout:
    """How a case's workers are laid out: ``strategy`` "" for a single-device case."""

    strategy: str = ""
    workers: int = 1

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
        if self.strategy == "dpxtp":
            data, model = self.mesh
            return f"dp{data}xtp{model}"
        return f"{self.strategy}-w{self.workers}"

    def unfit(self) -> str | None:
        """Why this many workers cannot run the strategy (None: they can)."""
        if self.strategy == "dpxtp" and (self.workers < 2 * MODEL_AXIS_2D
                                         or self.workers % MODEL_AXIS_2D):
            return (f"dpxtp needs an even worker count of at least {2 * MODEL_AXIS_2D} (a model "
                    f"axis of {MODEL_AXIS_2D}); got {self.workers}")
        if self.strategy and self.workers < 2:
            return f"{self.strategy} needs two workers or more"
        return None

