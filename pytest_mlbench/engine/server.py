"""One case, built and served inside its framework's worker.

The parent (measuring/case_run.py) drives it phase by phase: ``start`` (what the implementation starts
from), ``evaluate`` (loss and gradient, or the first probe's result), ``steps`` (checked
training steps), ``round`` (one timed round, its results kept alike with the rest of its
turn's, a digest sent back), ``fetch`` (the kept results the parent audits, chosen
after the turn), ``finish`` (what training and timing left behind). Every command reports
the compilations it caused, attributed to its phase, which is how "eager means eager" and
"nothing compiles while timed" are checked. Errors in the implementation are sent back as
the case's failure; the worker keeps serving its other cases.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import variants
from pytest_mlbench.engine import allocator, runners, usage
from pytest_mlbench.engine.protocol import (
    CaseSpec,
    Evaluation,
    Fetched,
    Finished,
    Gradient,
    Heap,
    Output,
    PeakMemory,
    RoundRan,
    Seconds,
    Started,
    Stepped,
)
from pytest_mlbench.errors import StepCheck, Unsupported
from pytest_mlbench.precision import POLICIES, dtype_name
from pytest_mlbench.workloads import catalogue, data
from pytest_mlbench.workloads.case import Case, CaseId


class CaseServer:
    def __init__(self, adapter: Any, spec: CaseSpec, rank: int = 0,
                 dp: dict[str, Any] | None = None) -> None:
        adapter = for_mode(adapter, spec.variant)  # torch's xla: torch on torch_xla's device
        self.adapter, self.spec, self.rank = adapter, spec, rank
        self.cache_before = _persistent_cache(adapter)  # the compile cache's counts, so far
        root = Path(spec.root)
        workload = catalogue.load_workload(root / spec.workload)
        shape, task = workload.shape(spec.size, spec.shape), workload.task(spec.task)
        self.id = CaseId(workload, shape, task, spec.framework, spec.variant, spec.device,
                         spec.precision, spec.workers, spec.strategy, spec.nodes)
        self.policy = POLICIES[spec.precision]
        # per phase: the implementation's own compilations, and every compilation the
        # framework's backend made (eager dispatch's too, where the adapter tells them apart)
        self.compiles: dict[str, int] = {}
        self.backend: dict[str, int] = {}
        self.where = f"{spec.framework} {spec.variant} ({spec.name})"
        with self.phase("build"):
            adapter.setup(spec.device, self.policy, spec.seed)
            inputs, params = data.seeded_start(workload, shape, spec.seed, self.policy)
            self.digest = data.digest(inputs, params)
            self.case = Case(self.id, adapter, self.policy,
                             {k: adapter.asarray(v) for k, v in inputs.items()},
                             {k: adapter.asarray(v) for k, v in params.items()},
                             spec.seed, rank)
            impl = self._build(root, workload, dp)
            runners.check_protocol(impl, task.kind, self.where)
            stateful = bool(task.optimizer and task.optimizer.slots)
            self.runner = runners.RUNNERS[task.kind](impl, adapter, stateful)
            self.runner.feed = self.case.feed
            self.runner.accepted()  # asked once, here, before anything is timed
        # training: the seeded data as the implementation got them (a data-parallel engine's
        # shards), fed back for every check on them; timed steps get batches drawn from them
        self.base = dict(self.case.data)
        self.inputs = inputs
        self.params64 = data.widen(params)
        self.serial = 0  # timed rounds run so far, warm-up ones too (round, fetch)
        self.stash: dict[int, Any] = {}  # the results of the latest round command's rounds
        self.outputs_shape = self._outputs_shape(inputs)
        # training: the seeded rows on the device, the harness's own (no implementation holds
        # them), from which each timed step's batch is selected where the step runs
        self.rows: dict[str, Any] = {}
        if task.kind == "train":
            with self.phase("build"):
                data.assert_drawable(workload, shape, inputs)
                self.rows = {k: adapter.asarray(v) for k, v in inputs.items()}
                self._batch(1)  # the selection's own first use (JAX compiles its gather)

    def _build(self, root: Path, workload: Any, dp: dict[str, Any] | None) -> Any:
        module = catalogue.implementation(root, workload, self.id.framework)
        if self.id.strategy:
            if self.policy.mixed:
                raise Unsupported(f"{self.policy.name} runs on one device: the parallel "
                                  "engines train at the storage dtype")
            loss = catalogue.data_parallel_loss(module, self.case)
            if loss is None:
                raise runners.ProtocolError(
                    f"{self.where}: impl_{self.id.framework}.py has no functional loss (build "
                    "= functional.<fw>(forward, loss)) nor data_parallel_loss(case), one of "
                    "which the spec's parallel entry needs")
            return self.adapter.parallel(self.case, loss, dp or {})
        return module.build(self.case)

    def _outputs_shape(self, inputs: dict[str, np.ndarray]) -> tuple[int, ...] | None:
        workload = self.id.workload
        if self.id.task.transform != "vjp" or workload.forward is None:
            return None
        out = workload.forward(np, self.params64, data.widen(inputs))
        return tuple(np.shape(out))

    @contextlib.contextmanager
    def phase(self, name: str) -> Any:
        counters = ((self.compiles, self.adapter.compile_events),
                    (self.backend, getattr(self.adapter, "backend_compiles",
                                           self.adapter.compile_events)))
        before = [count() for _, count in counters]
        try:
            yield
        finally:
            for (into, count), start in zip(counters, before, strict=True):
                into[name] = into.get(name, 0) + count() - start

    # -- commands ---------------------------------------------------------------------------

    def start(self) -> Started:
        runner = self.runner
        hyper = runner.hyperparameters() if isinstance(runner, runners.TrainRunner) else None
        census = self.adapter.census(runner.impl)
        return Started(digest=self.digest, snapshot=runner.snapshot(), census=census,
                       hyperparameters=hyper, compiles=dict(self.compiles))

    def probes(self, keys: list[int]) -> list[Any]:
        """Framework arrays of the probes (or training batches) with these keys."""
        return [self.prepare(k) for k in keys]

    def prepare(self, key: int) -> Any:
        """A call's input, made inside its round's clock (a data loader's feed): training,
        the step's batch; other kinds, the call's probe. Key 0 is the one the checks before
        timing use; a timed call's key is a secret the parent sends with its round."""
        if self.id.task.kind == "train":
            return self._batch(key)
        return {k: self.adapter.asarray(v) for k, v in self._probe(key).items()}

    def _batch(self, key: int) -> dict[str, Any]:
        """A training step's batch, placed as the case's engine wants it: key 0, the seeded
        data; any other, the rows its key draws (data.batch_rows), selected on the device
        from the seeded rows already there, so that a step's only traffic from the host is
        its indices."""
        if key == 0:
            return self.base
        rows = data.batch_rows(self.id.workload, self.id.shape, self.inputs, key)
        arrays = {k: self._take(k, r) for k, r in rows.items()}
        return self.case.shard(arrays) if self.case.shard else arrays

    def _take(self, name: str, rows: np.ndarray | None) -> Any:
        """Array ``name``'s rows ``rows`` (None: as seeded), by the adapter's selection on
        the device (``take``); an adapter without one sends the rows from the host."""
        if rows is None:
            return self.rows[name]
        take = getattr(self.adapter, "take", None)
        if take is None:
            return self.adapter.asarray(np.asarray(self.inputs[name])[rows])
        return take(self.rows[name], rows)

    def rehearsal(self) -> Callable[[], Any] | None:
        """What a pinning warm-up repeats after its round (engine/framework_worker.py): the
        round itself (None), or, training, a loss and gradient on the seeded data, which
        busies the same threads without a step: every case of a pass has then made as many
        steps when timing starts, whose batches (data.step_key) are the same for all."""
        if self.id.task.kind != "train":
            return None

        def again() -> None:
            with self.phase("check"), self._where():
                self.runner.evaluate(self.probes([0])[0])

        return again

    def _probe(self, key: int) -> dict[str, np.ndarray]:
        i = self.id
        return data.probe(i.workload, i.shape, i.task, self.spec.seed, key, self.policy,
                          self.params64, self.outputs_shape)

    def evaluate(self, index: int = 0) -> Evaluation:
        """Training: loss and gradient where the parameters are; other kinds: the result
        for probe ``index``."""
        with self.phase("check"), self._where():
            probe = self.probes([index])[0]
            if self.id.task.kind == "train":
                self.case.feed(probe)
            found = self.runner.evaluate(probe)
        if self.id.task.kind == "train":
            return Gradient(loss=found["loss"], grads=found["grads"])
        return Output(found)

    def steps(self, n: int) -> Stepped:
        """``n`` checked training steps, each synchronised and timed on its own."""
        losses, times = [], []
        with self.phase("check"), self._where():
            for _ in range(n):
                seconds, outs, tail = runners.timed_round(self.runner, [None],
                                                          contextlib.nullcontext)
                outs, tail = runners.materialise(self.runner, outs, tail)
                losses.append(float(np.asarray(outs[0], np.float64)))
                times.append(seconds)
            dtypes = self._dtypes()
            snap = self.runner.snapshot(tail)
        return Stepped(losses=losses, times=times, snapshot=snap, dtypes=dtypes)

    def round(self, calls: int, keys: list[int] | None = None,
              follows: bool = False) -> RoundRan:
        """One timed round of ``calls`` calls, read like every other: its results, checked
        inside its clock and copied to NumPy after it (runners.py), are kept here until the
        next round that does not follow (the latest of the turn before longer: it is where
        the next turn's first round started) and a digest of them goes back now, with the
        worker's serial number of the round. Which rounds are audited is decided in the
        parent, which fetches them afterwards (``fetch``) and checks the digests: nothing the
        worker can read before or during a round says whether it will be judged. ``keys``:
        each call's probe key (inference, transforms) or batch key (training:
        data.step_key), a secret the parent sends with the round it is for: a timed turn is
        one command a round (``follows``: this round continues the previous command's turn,
        whose kept results stay kept), so the worker learns a round's probes only as the
        round starts, and no round's answers can be worked out in an earlier round (the
        turn's dropped first one included). Warm-up rounds count as timing too: what was
        checked is what runs from here on, so nothing may compile (or recompile) any more."""
        began = runners.time.perf_counter()
        if not follows:
            kept_last = self.stash.get(self.serial)
            self.stash = {} if kept_last is None else {self.serial: kept_last}
        # before the clock: the heap as a pre-touch left it, if another case changed it since
        again = None if follows else allocator.pretouch_again()
        with self.phase("timing"), self._where(), usage.WATCH.timed():
            before = allocator.minor_faults()
            # what the round used (checking/cores.py): every thread's CPU time, read on
            # either side of its clock (after it, for ``after`` below too)
            read_at = runners.time.perf_counter()
            start_cpu = runners.process_time()
            start = runners.time.perf_counter()
            took, outs, tail = runners.timed_round(self.runner, keys or [0] * calls,
                                                   self._guard(), self.prepare)
            end = runners.time.perf_counter()
            end_cpu = runners.process_time()
            # page faults (memory the OS mapped in while the clock ran), read outside the
            # clock: a step that pays the allocator every time shows it
            faults = allocator.minor_faults() - before
            self.serial += 1
            # training keeps the state the round left, not each step's loss: nothing of a
            # round is copied that the audit does not read
            kept = [] if self.id.task.kind == "train" else outs
            result = self._result(*runners.materialise(self.runner, kept, tail))
            self.stash[self.serial] = result
            digest = result_digest(result)
            # the process's CPU time, every thread's: what work after the clock costs
            # (the results' host copies and digests), whether or not a busy host preempted
            # the worker there (a CPU-bound round that used its time slice is preempted
            # right after it, 4-7 ms on a loaded 2-core host, which wall time would count)
            after = runners.process_time() - end_cpu
        # on the same clock: what the round's readings leave out of the readings around them
        # (nothing, on one honest clock), and the whole command (``span``), which the parent
        # compares with its own
        return RoundRan(seconds=took, serial=self.serial, digest=digest, faults=faults,
                        steps=self.runner.calls, pretouched=again,
                        span=runners.time.perf_counter() - began, outside=end - start - took,
                        after=after, cpu=end_cpu - start_cpu, cpu_wall=end - start,
                        usage_s=start - read_at)

    def bare_loop(self, keys: list[int]) -> Seconds:
        """The built step over ``keys`` in a plain loop (runners.bare_loop), after the audited
        rounds: nothing may compile here either."""
        with self.phase("timing"), self._where(), usage.WATCH.timed():
            return Seconds(runners.bare_loop(self.runner, keys, self.prepare))

    def _result(self, outs: list[Any], tail: Any) -> Any:
        """What a round produced, as the audit reads it: training, the parameters and state
        it left, with the number of steps the runner has made since build (the audit counts
        those, not the implementation's own account); other kinds, every call's output."""
        if self.id.task.kind == "train":
            return {**self.runner.snapshot(tail), "steps": self.runner.calls}
        return list(outs)

    def fetch(self, wanted: list[tuple[int, int | None]]) -> Fetched:
        """Kept results of rounds, each named by how many rounds it is behind the latest (0:
        the latest): a training round's whole result, or one call's output (``call``), as
        they were when the round's digest was sent."""
        found = []
        for back, call in wanted:
            serial = self.serial - back
            if serial not in self.stash:
                raise AssertionError(f"{self.where}: the round {back} round(s) before the "
                                     f"latest is no longer kept in the worker")
            result = self.stash[serial]
            found.append(result if call is None else result[call])
        return Fetched(found)

    @contextlib.contextmanager
    def _where(self) -> Any:
        """A result that is not the framework's own array, or a step an adapter's own check
        refused (errors.StepCheck), fails naming the case."""
        try:
            yield
        except (runners.NotConcrete, StepCheck) as exc:
            raise type(exc)(f"{self.where}: {exc}") from None

    def _guard(self) -> Callable[[], Any]:
        guards = [c.guard for c in self.case.compiled]

        def combined() -> Any:
            stack = contextlib.ExitStack()
            for g in guards:
                stack.enter_context(g())
            return stack

        return combined

    def _dtypes(self) -> dict[str, str]:
        """The dtype of every parameter and optimizer slot (``state.<slot>.<name>``; the step
        count is an integer or a float by the framework's choice, and left out), as the
        implementation holds them."""
        impl = self.runner.impl
        found = {k: dtype_name(v) for k, v in impl.params().items()}
        if self.id.task.kind == "train" and self.runner.stateful:
            found.update({f"state.{k}": dtype_name(v) for k, v in impl.state().items()
                          if k != "count"})
        return found

    def finish(self, evaluate: bool = True, profile: bool = True) -> Finished:
        """After timing: compilations per phase, traces of the compiled functions, whether
        the precision policy still holds, dtypes, the census, and (training, when
        ``evaluate``) loss and gradient where training has taken the parameters."""
        traces, compiles = self.case.traces(), dict(self.compiles)
        backend, compile_s = dict(self.backend), self._compile_seconds()
        policy: str | None = None
        try:
            self.adapter.verify_policy(self.policy)
        except AssertionError as exc:
            policy = str(exc)
        census = self.adapter.census(self.runner.impl)
        dtypes = self._dtypes()
        snapshot, trained = None, None
        if self.id.task.kind == "train" and evaluate:
            snapshot = self.runner.snapshot()
            found = self.evaluate()
            assert isinstance(found, Gradient)
            trained = found
        return Finished(traces=traces, compiles=compiles, backend_compiles=backend,
                        compile_s=compile_s, policy=policy, census=census, dtypes=dtypes,
                        snapshot=snapshot, trained=trained, resident=self._resident(),
                        collectives=self._collectives() if profile else None,
                        loss_scale=self._loss_scale(), compile_cache=self._compile_cache())

    def _compile_cache(self) -> tuple[int, int] | None:
        """What the persistent compile cache served this case, and what it compiled."""
        now, before = _persistent_cache(self.adapter), self.cache_before
        if now is None or before is None:
            return None
        return now[0] - before[0], now[1] - before[1]

    def _loss_scale(self) -> float | None:
        runner = self.runner
        return runner.loss_scale() if isinstance(runner, runners.TrainRunner) else None

    def _collectives(self) -> list[float] | None:
        """A parallel case's share of a step in collectives per worker, from the framework's
        profiler over a few steps (after everything is checked: the parameters it leaves are
        read by nothing)."""
        measure = getattr(self.runner.impl, "collectives", None)
        if not self.id.strategy or not callable(measure):
            return None
        with self.phase("check"):
            return [float(s) for s in measure()]

    def _resident(self) -> dict[str, list[int]] | None:
        """A parallel case's engine's account of what each worker holds (after the trained
        evaluation, so that gradients are there); None for a single-device case."""
        if not self.id.strategy:
            return None
        held = getattr(self.runner.impl, "resident", None)
        if not callable(held):
            raise runners.ProtocolError(
                f"{self.where}: the {self.id.strategy} trainer has no resident() saying what "
                "each worker holds, which the sharding check reads")
        return {k: [int(b) for b in v] for k, v in held().items()}

    def pretouch(self) -> Heap:
        """Fault the heap in, with headroom, before the timed rounds (allocator.py)."""
        return Heap(allocator.pretouch())

    def compiled_seconds(self) -> Seconds:
        return Seconds(self._compile_seconds())

    def _compile_seconds(self) -> float:
        """First calls of the compiled functions: tracing, compilation, one dispatch."""
        return sum(c.first_call_s or 0.0 for c in self.case.compiled if c.variant != "eager")

    def peak_memory(self) -> PeakMemory:
        probe = getattr(self.adapter, "peak_memory", None)
        if probe is None:
            return PeakMemory(None)
        return PeakMemory(probe(lambda: runners.timed_round(self.runner, [0],
                                                            contextlib.nullcontext,
                                                            self.prepare)))


def result_digest(result: Any) -> Any:
    """A digest of a round's result (training: parameters and state; other kinds: one per
    call's output), sent before the parent says which rounds it audits."""
    if isinstance(result, dict):
        return data.digest(result["params"], result["state"])
    return [data.digest(out if isinstance(out, dict) else {"": out}) for out in result]


def for_mode(adapter: Any, variant: str) -> Any:
    """The adapter a case of ``variant`` runs through: the one ``adapter.for_mode(mode)``
    gives where the adapter has that method (a mode on a device of its own), else
    ``adapter``."""
    found = getattr(adapter, "for_mode", None)
    return found(variants.mode(variant)) if callable(found) else adapter


def _persistent_cache(adapter: Any) -> tuple[int, int] | None:
    """The adapter's count of compilations its persistent compile cache served and those it
    compiled, in this process so far (None: it keeps none)."""
    counts = getattr(adapter, "persistent_cache", None)
    return counts() if callable(counts) else None
