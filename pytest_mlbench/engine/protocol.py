"""What the parent and a framework worker say to each other, as types.

The parent (engine/pools.py) sends one command, the worker (engine/framework_worker.py)
answers each with one reply; both are frozen dataclasses, pickled across the pipe. A command
that concerns a case is wrapped in ``OnCase`` with the case's handle, and its result comes
back wrapped in what became of it: ``Ok`` (the reply), ``Skipped``, ``Failed`` or
``Raised``. Every case command names its reply's type (``CaseCommand[R]``), so
``FrameworkPool.case(handle, Round(...))`` is a ``list[RoundRan]`` to mypy: a new fact a
worker reports is one field here, where the worker makes it, and where the parent reads it.

Replies hold NumPy arrays and plain Python values (dicts of arrays: parameters, optimizer
state, gradients, as ``{"params": ..., "state": ...}`` snapshots), never a framework's own
objects. The two sides of an A/B session must run the same protocol (``PROTOCOL``, which a
worker's hello reports: launcher.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

if TYPE_CHECKING:
    from pytest_mlbench.workloads.case import CaseId

# bumped when a command or reply changes: an A/B worker of another revision must match
# (11: a Round is one round, its reply a RoundRan; the case spec a CaseSpec)
PROTOCOL = 11


@dataclass(frozen=True)
class CaseSpec:
    """What a worker builds a case from (``Open``): the case's names, no objects (the worker
    loads the workload from ``root`` itself), the size its shape is from and the seed."""

    root: str  # the suites' root folder
    workload: str
    size: str
    shape: str  # Shape.label
    task: str  # Task.label
    framework: str
    variant: str
    device: str
    precision: str
    workers: int
    strategy: str
    nodes: int
    seed: int
    name: str  # CaseId.name: the case's messages, and the parent's draws (case_run)

    @classmethod
    def of(cls, cid: CaseId, root: str, size: str, seed: int) -> CaseSpec:
        """What a worker needs to rebuild ``cid``."""
        return cls(root=root, workload=cid.workload.name, size=size, shape=cid.shape.label,
                   task=cid.task.label, framework=cid.framework, variant=cid.variant,
                   device=cid.device, precision=cid.precision, workers=cid.workers,
                   strategy=cid.strategy, nodes=cid.nodes, seed=seed, name=cid.name)

Arrays = dict[str, Any]  # name -> NumPy array
Snapshot = dict[str, Arrays]  # {"params": ..., "state": ...}, NumPy copies
R = TypeVar("R")


# -- replies --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Done:
    """A command that reports nothing (ping, close)."""


@dataclass(frozen=True)
class WorkerInfo:
    """The worker's framework threads and versions, the threads it pinned (none before its
    first ``Learn``), and what its compiler's one-time start-up cost (None: not warmed up)."""

    threads: dict[str, Any]  # each thread control the framework reports
    versions: dict[str, str]
    pinned: dict[str, Any]
    compiler_start_s: float | None

    def as_record(self) -> dict[str, Any]:
        """The record's ``environment.workers`` entry."""
        return asdict(self)


@dataclass(frozen=True)
class Opened:
    handle: int


@dataclass(frozen=True)
class PeakFound:
    gflops: float | None  # the framework's best matmul at the dtype


@dataclass(frozen=True)
class Started:
    """What the implementation starts from, before anything runs."""

    digest: str  # of the seeded inputs and parameters it was built with
    snapshot: Snapshot
    census: Any  # the framework's count of trainable elements (adapter.census)
    hyperparameters: dict[str, float] | None  # training with an optimizer that reports them
    compiles: dict[str, int]  # per phase, so far (build)


@dataclass(frozen=True)
class Gradient:
    """A training step's loss and gradient (``Evaluate``)."""

    loss: Any  # a NumPy float64 scalar
    grads: Arrays


@dataclass(frozen=True)
class Output:
    """An inference or transform call's result (``Evaluate``)."""

    value: Any


Evaluation = Gradient | Output


@dataclass(frozen=True)
class Stepped:
    """Checked training steps, each synchronised and timed on its own."""

    losses: list[float]
    times: list[float]
    snapshot: Snapshot  # where the last step left the parameters and state
    dtypes: dict[str, str]


@dataclass(frozen=True)
class TurnUsage:
    """What a timed turn used beyond its rounds' own threads, and what the worker holds as it
    ends (engine/usage.Turn.end), for the parent to judge (checking/cores.py); sent with the
    reply to the Round that ends the turn."""

    span: float  # seconds from the turn's first round to this reading, on the worker's clock
    children_cpu: float  # CPU seconds its child processes used over ``span``, live and reaped
    children: dict[int, str]  # the child processes that ran over the turn: pid -> name
    widened: dict[str, list[int]]  # each thread or child that may leave ``cores``: its cores
    cores: list[int]  # the case's cores, where the turn ran
    controls: dict[str, tuple[int, int]]  # each thread control that changed: (now, as set)
    set_while_timed: dict[str, int]  # calls that changed a control while timed: how many
    new_threads: dict[int, str]  # threads held that were not when timing began: tid -> name
    new_processes: dict[int, str]  # the same of child processes


@dataclass(frozen=True)
class RoundRan:
    """A timed round: its seconds, the worker's serial number for it, the digest of its kept
    result, its page faults and the runner's step count after it; the heap's re-pre-touch
    before it (None when nothing changed it) and the worker's own clock: the whole command
    (``span``), what the round's readings left out of the readings around them, and its work
    after the round's clock (``after``, in the process's CPU seconds: the host copies and
    digests of its results)."""

    seconds: float
    serial: int
    digest: Any
    faults: int
    steps: int | None  # None: a reply that keeps no count
    pretouched: dict[str, Any] | None
    span: float
    outside: float
    after: float | None = None
    # the process's CPU seconds over every thread of the worker, read just before the
    # round's clock started and just after it stopped, and the wall seconds between those two
    # clock readings (its guard's entry and exit included, which ``seconds`` leaves out);
    # ``usage_s``: what the readings added cost the command (checking/cores.py)
    cpu: float | None = None
    cpu_wall: float | None = None
    usage_s: float = 0.0
    usage: TurnUsage | None = None  # the turn's, on the Round that ``ends`` it


@dataclass(frozen=True)
class Fetched:
    results: list[Any]  # what each asked-for round kept, in the order asked


@dataclass(frozen=True)
class Finished:
    """What timing left behind."""

    traces: Any  # of the compiled functions (Case.traces)
    compiles: dict[str, int]  # the implementation's own compilations, per phase
    backend_compiles: dict[str, int]  # every compilation of the framework's backend, per phase
    compile_s: float
    policy: str | None  # why the precision policy no longer holds (None: it holds)
    census: Any
    dtypes: dict[str, str]
    # the case's compilations the framework's persistent compile cache served and those it
    # compiled (loaded, compiled; the adapter's ``persistent_cache``), None where it keeps no count
    compile_cache: tuple[int, int] | None = None
    snapshot: Snapshot | None = None  # training, when asked to evaluate
    trained: Gradient | None = None  # loss and gradient where training took the parameters
    # a parallel case: bytes of parameters, gradients and optimizer state held on each of
    # this reply's workers (a torch rank: one; a JAX process: each device of its mesh)
    resident: dict[str, list[int]] | None = None
    # a parallel case: the share of a step each of this reply's workers spent in collectives
    # (the framework's profiler, after timing); None where the engine cannot say
    collectives: list[float] | None = None
    # training under a loss-scaling policy (amp16): the trainer's dynamic loss scale after
    # timing (``loss_scale()``); None where the implementation reports none
    loss_scale: float | None = None


@dataclass(frozen=True)
class Heap:
    facts: dict[str, Any]  # the pre-touch (engine/allocator.pretouch), as the record keeps it


@dataclass(frozen=True)
class Seconds:
    value: float


@dataclass(frozen=True)
class PeakMemory:
    found: tuple[int, str] | None  # bytes and their scope (adapter.peak_memory)


# what became of a command (a case's failure is data, the worker keeps serving)

@dataclass(frozen=True)
class Ok(Generic[R]):
    value: R


@dataclass(frozen=True)
class Skipped:
    why: str  # a device or dtype the framework lacks


@dataclass(frozen=True)
class Failed:
    message: str  # a check inside the worker failed


@dataclass(frozen=True)
class Raised:
    error: str  # the implementation raised: type and message
    traceback: str


Outcome = Ok[Any] | Skipped | Failed | Raised


# -- commands -------------------------------------------------------------------------------

class Command:
    name: ClassVar[str]  # how errors name it ("did not answer 'peak'")


@dataclass(frozen=True)
class Ping(Command):
    name: ClassVar[str] = "ping"


@dataclass(frozen=True)
class Info(Command):
    name: ClassVar[str] = "info"


@dataclass(frozen=True)
class Open(Command):
    spec: CaseSpec  # what the worker builds the case from
    name: ClassVar[str] = "open"


@dataclass(frozen=True)
class Close(Command):
    handle: int
    name: ClassVar[str] = "close"


@dataclass(frozen=True)
class Peak(Command):
    dtype: str
    name: ClassVar[str] = "peak"


class CaseCommand(Generic[R]):
    """A command to one open case; ``R`` is its reply."""

    name: ClassVar[str]


@dataclass(frozen=True)
class OnCase(Command):
    handle: int
    command: CaseCommand[Any]
    name: ClassVar[str] = "case"


@dataclass(frozen=True)
class Start(CaseCommand[Started]):
    name: ClassVar[str] = "start"


@dataclass(frozen=True)
class Evaluate(CaseCommand[Evaluation]):
    index: int = 0  # the probe's key (0: the probe the checks before timing use)
    name: ClassVar[str] = "evaluate"


@dataclass(frozen=True)
class Steps(CaseCommand[Stepped]):
    n: int
    name: ClassVar[str] = "steps"


@dataclass(frozen=True)
class Round(CaseCommand[RoundRan]):
    """One timed round of ``calls`` calls; ``keys``: each call's key, the probe's (inference,
    transforms) or the step's batch's (training: data.step_key), secrets sent with the round
    they are for (None: key 0, each call). A timed turn is one Round a round: ``follows``
    says this one continues the previous Round's turn (the results that turn kept stay kept,
    and the heap is not re-pre-touched), so the worker learns round r's keys only as round r
    starts."""

    calls: int
    keys: list[int] | None = None
    follows: bool = False
    # this round ends its turn: after it the worker reads what the turn used and what it
    # holds, still on the case's cores, and sends it with the reply (RoundRan.usage)
    ends: bool = False
    name: ClassVar[str] = "round"


@dataclass(frozen=True)
class BareLoop(CaseCommand[Seconds]):
    """The built step ``len(keys)`` times in a plain loop, fed the same way as a round's
    calls (``keys``: each call's, as a Round's), one sync at the end: seconds a call
    (runners.bare_loop). Informative: the harness's overhead is a round's figure over it."""

    keys: list[int]
    name: ClassVar[str] = "bare_loop"


@dataclass(frozen=True)
class Learn(CaseCommand[RoundRan]):
    """A first warm-up ``round``, repeated while the worker watches which threads work; it
    then pins them (``pin``) or frees every thread."""

    round: Round
    pin: bool
    name: ClassVar[str] = "learn"


@dataclass(frozen=True)
class Fetch(CaseCommand[Fetched]):
    """Kept results, each as (rounds behind the latest, call or None for the whole round)."""

    wanted: list[tuple[int, int | None]]
    name: ClassVar[str] = "fetch"


@dataclass(frozen=True)
class Finish(CaseCommand[Finished]):
    evaluate: bool = True  # training: loss and gradient where training took the parameters
    profile: bool = True  # a parallel case: its share of a step in collectives (timed runs)
    name: ClassVar[str] = "finish"


@dataclass(frozen=True)
class Pretouch(CaseCommand[Heap]):
    name: ClassVar[str] = "pretouch"


@dataclass(frozen=True)
class CompiledSeconds(CaseCommand[Seconds]):
    name: ClassVar[str] = "compiled_seconds"


@dataclass(frozen=True)
class MeasurePeakMemory(CaseCommand[PeakMemory]):
    name: ClassVar[str] = "peak_memory"
