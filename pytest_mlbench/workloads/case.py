"""One benchmark case: what collection knows (CaseId: cheap, no framework imported, sent to
workers by name as an engine/protocol.CaseSpec) and what an implementation's build(case)
receives in its worker (Case)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_mlbench import variants
from pytest_mlbench.frameworks.base import Compiled
from pytest_mlbench.parallel import Layout
from pytest_mlbench.precision import Policy
from pytest_mlbench.workloads.optim import Optimizer
from pytest_mlbench.workloads.spec import Shape, Task, Workload


@dataclass(frozen=True)
class CaseId:
    workload: Workload
    shape: Shape
    task: Task
    framework: str
    variant: str
    device: str
    precision: str
    workers: int = 1
    strategy: str = ""  # parallel.STRATEGIES; "" for a single-device case
    nodes: int = 1  # the groups of processes the workers are launched as

    @property
    def layout(self) -> Layout:
        return Layout(self.strategy, self.workers, self.nodes)

    @property
    def head(self) -> str:
        """``linreg-d10``, ``mlp_optim-adam``: workload, then shape and task labels if any."""
        parts = [self.workload.name, self.shape.label]
        if self.workload.tasks_in_ids:
            parts.append(self.task.label)
        return "-".join(p for p in parts if p)

    @property
    def impl(self) -> str:
        label = self.layout.label
        return f"{self.framework}-{self.variant}" + (f"-{label}" if label else "")

    @property
    def name(self) -> str:
        """``mlp-jax-jit-cpu-fp32``; ``mlp-torch-eager-fsdp-w2-cpu-fp32`` for two workers
        sharding the parameters, ``vit-jax-jit-dp2xtp2-cpu-fp32`` on a 2-D mesh."""
        return f"{self.head}-{self.impl}-{self.device}-{self.precision}"

    @property
    def group(self) -> str:
        """Cases compared with each other in one table (Identity.group says the same)."""
        label = self.layout.label
        return f"{self.head} {self.device} {self.precision}" + (f" {label}" if label else "")


@dataclass
class Case:
    """What an implementation's ``build(case)`` gets. Arrays are already on the device at the
    policy's dtype, made from the same seeded bytes for every framework.

    Training reads its batch from ``data`` at every step (``batch()``), never once at build:
    the harness puts each timed step's batch there as the step is called (a data loader's
    feed; the batch is drawn from a secret sent with the step's round, data.step_key), so no
    step's work can be done before its round starts. The arrays keep their names, shapes and
    dtypes; compiled steps take them as arguments, not as constants."""

    id: CaseId
    adapter: Any
    policy: Policy
    data: dict[str, Any]
    params: dict[str, Any]
    seed: int
    rank: int = 0  # data-parallel cases: this worker's rank among ``id.workers``
    compiled: list[Compiled] = field(default_factory=list)
    # a data-parallel engine's placement of a batch (its rank's shard, a mesh's sharding),
    # applied by the harness before the step's clock starts
    shard: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def batch(self) -> dict[str, Any]:
        """The data of the step being called: read it at every step."""
        return self.data

    def feed(self, batch: dict[str, Any]) -> None:
        """The harness puts the next step's batch in place (the same names, shapes, dtypes)."""
        self.data.update(batch)

    @property
    def task(self) -> Task:
        return self.id.task

    @property
    def optimizer(self) -> Optimizer:
        if self.id.task.optimizer is None:
            raise AttributeError(f"{self.id.name}: task {self.id.task.label!r} is not a "
                                 "training step and has no optimizer")
        return self.id.task.optimizer

    @property
    def learning_rate(self) -> float:
        return self.optimizer.lr

    @property
    def dims(self) -> Any:
        return self.id.shape.dims

    @property
    def variant(self) -> str:
        return self.id.variant

    @property
    def mode(self) -> str:
        """The variant's compile mode (``jit`` of ``jit+sdpa``)."""
        return variants.mode(self.id.variant)

    @property
    def idiom(self) -> str:
        """The variant's idiom (``sdpa`` of ``jit+sdpa``; "" for a plain mode): which way
        of writing the model the implementation builds (pytest_mlbench/variants.py)."""
        return variants.idiom(self.id.variant)

    @property
    def dtype(self) -> str:
        """The policy's dtype name (``float32``, ``float64``, ``bfloat16``)."""
        return self.policy.dtype

    @property
    def inputs(self) -> dict[str, Any]:
        """The data the model reads (the spec's ``input_keys``)."""
        return self.id.workload.inputs(self.data)

    def compile(self, fn: Callable[..., Any], donate: tuple[int, ...] = ()) -> Compiled:
        """Apply this case's variant's compile mode to ``fn`` (identity for eager); the harness
        later checks that it compiled, and that it did not compile again while timed.
        ``donate``: argument positions whose buffers the compiled ``fn`` may reuse (JAX)."""
        mode = variants.mode(self.variant)  # (an adapter of another package may predate donate)
        compiled = (self.adapter.compile(fn, mode, donate) if donate
                    else self.adapter.compile(fn, mode))
        self.compiled.append(compiled)
        return compiled

    def traces(self) -> list[int]:
        return [c.traces() for c in self.compiled]
