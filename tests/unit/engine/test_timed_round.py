"""The figure is the step (issue 45): what a timed round's clock holds, driven as
measuring/case_run.py drives a turn, in-process on NumPy least squares (tests/cheats/honest).

- A result's copy to the host is not the step's: an adapter whose conversion to NumPy is slow
  (a GPU's transfers, per array) gets the figure a fast one gets; the copy's time shows in the
  worker's account of its work after the clock (``after``), which the parent bounds.
- A round's batches are made inside its clock: preparation that takes time is timed, so no
  work can be moved into it unseen.
- The clock stops on the framework's own arrays, on the case's device, checked before the
  sync: anything else fails before it is synchronised or converted."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import frameworks
from pytest_mlbench.engine import runners
from pytest_mlbench.engine.protocol import CaseSpec
from pytest_mlbench.engine.server import CaseServer
from pytest_mlbench.frameworks.numpy_ import NumpyAdapter
from pytest_mlbench.workloads import catalogue, data
from pytest_mlbench.workloads.case import CaseId

CHEATS = Path(__file__).resolve().parents[2] / "cheats"
COPY_S = 0.05  # a copy to the host this slow: far beyond the step (microseconds)
CALLS = 4


def busy(seconds: float) -> None:
    """``seconds`` of CPU work (a copy's cost is CPU time, as the worker measures it): counted
    on the process's CPU clock, so that a loaded host's preemption does not shorten it (50 ms
    of wall time was 16 ms of CPU in a test line)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


class SlowCopy(NumpyAdapter):
    """NumPy whose every conversion to the host takes COPY_S."""

    def to_numpy(self, value: Any) -> np.ndarray:
        busy(COPY_S)
        return super().to_numpy(value)


def server_of(adapter: Any) -> CaseServer:
    workload = catalogue.load_workload(CHEATS / "honest")
    shape, task = workload.sizes["smoke"][0], workload.all_tasks[0]
    cid = CaseId(workload, shape, task, "numpy", "eager", "cpu", "fp32")
    return CaseServer(adapter, CaseSpec.of(cid, str(CHEATS), "smoke", 0))


def keys(server: CaseServer) -> list[int]:
    cid = server.id
    return [data.step_key(7, cid.workload, cid.shape, n) for n in range(10, 10 + CALLS)]


def test_a_slow_copy_to_the_host_is_not_in_the_figure() -> None:
    fast = server_of(frameworks.load("numpy", frameworks.BUILTIN))
    slow = server_of(SlowCopy())
    ran = {name: s.round(CALLS, keys(s)) for name, s in (("fast", fast), ("slow", slow))}
    # the old round copied params and the loss of every call inside its clock: 5 * COPY_S
    assert ran["slow"].seconds < COPY_S, ran["slow"]
    assert (ran["slow"].after or 0.0) >= 0.8 * COPY_S  # the copy of the state, after the clock
    assert (ran["fast"].after or 0.0) < COPY_S
    # the same work either way: the kept results agree
    assert ran["fast"].digest == ran["slow"].digest


def test_a_rounds_batches_are_made_inside_its_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A round's preparation (its batches) that takes time is in the round's figure: an
    implementation that wraps it to do work there does that work on the clock."""
    server = server_of(frameworks.load("numpy", frameworks.BUILTIN))
    prepare = server.prepare

    def slow_preparation(key: int) -> Any:
        time.sleep(COPY_S)
        return prepare(key)

    monkeypatch.setattr(server, "prepare", slow_preparation)
    ran = server.round(CALLS, keys(server))
    assert ran.seconds >= CALLS * COPY_S


def test_a_training_batch_is_the_rows_its_key_draws_selected_where_the_step_runs() -> None:
    """The batch a worker feeds a timed step is bit for bit the one the parent's reference
    draws (data.batch), made by the adapter's selection from the seeded rows it holds."""
    server = server_of(frameworks.load("numpy", frameworks.BUILTIN))
    key = keys(server)[0]
    fed = server.prepare(key)
    drawn = data.batch(server.id.workload, server.id.shape, server.inputs, key)
    assert sorted(fed) == sorted(drawn)
    for name in drawn:
        assert np.array_equal(fed[name], drawn[name]) and fed[name].dtype == drawn[name].dtype
    assert not np.array_equal(fed["x"], server.inputs["x"])  # drawn, not the seeded rows


class Elsewhere(NumpyAdapter):
    """NumPy whose arrays are all said to be on another device."""

    def on_device(self, value: Any) -> bool:
        return False


def test_a_result_that_is_not_the_frameworks_own_array_on_the_device_fails_before_its_sync(
        ) -> None:
    server = server_of(Elsewhere())
    with pytest.raises(runners.NotConcrete, match=r"timed call 1 is not on the case's device"):
        server.round(CALLS, keys(server))

    class Owed(np.ndarray):
        pass

    adapter = frameworks.load("numpy", frameworks.BUILTIN)
    with pytest.raises(runners.NotConcrete, match=r"is a .*Owed, not one of numpy's own"):
        runners.assert_concrete(adapter, np.zeros(2).view(Owed), "the result",
                                runners.concrete_types(adapter))


def test_data_that_are_not_one_set_of_rows_draw_each_group_by_its_own_rows() -> None:
    """A graph (tests/cheats/graph): node arrays of N rows and an edge list of E rows. Each
    step draws the nodes by their rows and the edges by theirs, whole edges; undeclared, the
    same data are refused in one line naming the arrays and SPEC.batch_rows."""
    import dataclasses

    from pytest_mlbench.errors import SpecError

    workload = catalogue.load_workload(CHEATS / "graph")
    shape = workload.sizes["smoke"][0]
    inputs, _ = data.seeded_start(workload, shape, 0, server_of_policy())
    batch = data.batch(workload, shape, inputs, 12345)
    assert batch["x"].shape == inputs["x"].shape and batch["edges"].shape == inputs["edges"].shape
    edges = {tuple(e) for e in inputs["edges"].tolist()}
    assert {tuple(e) for e in batch["edges"].tolist()} <= edges  # whole edges of the graph
    assert not np.array_equal(batch["edges"], inputs["edges"])
    fixed = dataclasses.replace(workload, batch_rows={"edges": None})
    assert np.array_equal(data.batch(fixed, shape, inputs, 12345)["edges"], inputs["edges"])
    undeclared = dataclasses.replace(workload, batch_rows={})
    with pytest.raises(SpecError, match=r"graph: the data's arrays \{'edges': 160, 'x': 48, "
                                        r"'y': 48\} .* do not share a first axis.*batch_rows"):
        data.batch(undeclared, shape, inputs, 12345)
    # and a worker selects the same rows on its device for a timed step
    cid = CaseId(workload, shape, workload.all_tasks[0], "numpy", "eager", "cpu", "fp32")
    server = CaseServer(frameworks.load("numpy", frameworks.BUILTIN),
                        CaseSpec.of(cid, str(CHEATS), "smoke", 0))
    fed = server.prepare(12345)
    assert all(np.array_equal(fed[k], batch[k]) for k in batch)
    assert server.round(2, [12345, 777]).steps == 2


def server_of_policy() -> Any:
    from pytest_mlbench.precision import POLICIES

    return POLICIES["fp32"]


class _Forward:
    def forward(self, probe: Any) -> Any:
        return {"y": np.asarray(probe, np.float32) * 2, "z": np.ones(2, np.float32)}


def test_an_inference_runners_evaluation_is_copied_through_its_runner() -> None:
    """evaluate() of an inference or transform runner copies a mapping's outputs through the
    runner (runners.tree_to_numpy, the adapter's readers kept by the runner)."""
    for kind in ("infer", "transform"):
        impl = _Forward()
        if kind == "transform":
            impl.apply = impl.forward  # type: ignore[attr-defined]
        runner = runners.RUNNERS[kind](impl, NumpyAdapter(), False)
        found = runner.evaluate(np.arange(3))
        assert found["y"].tolist() == [0.0, 2.0, 4.0] and found["z"].dtype == np.float32
