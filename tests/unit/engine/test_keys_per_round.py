"""Work done ahead (issue 32, class 3), inference: a round's probe keys reach the worker only
with that round's own command, so no round can work out a later round's answers. Driven the
way measuring/case_run.py drives a turn (one ``round`` command a round, ``follows`` set after
the first), an implementation that answers a turn's later rounds from work done in its first
(tests/cheats/aheadinfer: specs.AheadAnswers) finds nothing to look up and returns stale
answers, which the audit sees. A Round holds one round's keys (protocol 11: a command of
several rounds, which would hand the worker a whole turn's keys at once, cannot be sent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import frameworks, load_suite_file
from pytest_mlbench.engine.protocol import CaseSpec
from pytest_mlbench.engine.server import CaseServer
from pytest_mlbench.workloads import catalogue, data
from pytest_mlbench.workloads.case import CaseId

CHEATS = Path(__file__).resolve().parents[2] / "cheats"
SPECS = load_suite_file(CHEATS / "specs.py")
CALLS = 2


@pytest.fixture(autouse=True)
def _turns_cued_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cheat takes a pause of AHEAD_GAP_S for a turn's start (the worker was stopped);
    here the test says where a turn starts (``ended = -inf``), so a loaded host's pause
    between two round commands is never taken for a new turn's start."""
    monkeypatch.setattr(SPECS, "AHEAD_GAP_S", float("inf"))


def server_of(name: str = "aheadinfer") -> tuple[CaseServer, Any]:
    workload = catalogue.load_workload(CHEATS / name)
    shape, task = workload.sizes["smoke"][0], workload.all_tasks[0]
    cid = CaseId(workload, shape, task, "numpy", "eager", "cpu", "fp32")
    server = CaseServer(frameworks.load("numpy", frameworks.BUILTIN),
                        CaseSpec.of(cid, str(CHEATS), "smoke", 0))
    return server, server.runner.impl


def honest(server: CaseServer, key: int) -> np.ndarray:
    probe = data.widen(server._probe(key))
    return np.asarray(SPECS.features(np, server.params64, probe))


def wrong_calls(server: CaseServer, keys: list[list[int]], serials: list[int]) -> int:
    """Calls of the rounds whose kept outputs are not the honest answers to their probes."""
    wrong = 0
    for round_keys, serial in zip(keys, serials, strict=True):
        for key, out in zip(round_keys, server.stash[serial], strict=True):
            wrong += not np.allclose(out, honest(server, key), rtol=1e-4, atol=1e-5)
    return wrong


def turn_keys(rounds: int, start: int = 1000) -> list[list[int]]:
    return [[start + CALLS * r + c for c in range(CALLS)] for r in range(rounds)]


def test_a_round_command_holds_its_own_keys_only_so_nothing_is_answered_ahead() -> None:
    server, impl = server_of()
    server.evaluate(0)  # the checks before timing: answered honestly
    impl.ended = -float("inf")  # the worker was stopped before the turn: the cheat's cue
    keys = turn_keys(4)
    serials = []
    for i, round_keys in enumerate(keys):
        serials.append(server.round(CALLS, round_keys, i > 0).serial)
    assert set(serials) <= set(server.stash)  # a turn's rounds stay kept for its fetch
    # every round after the turn's first counted on answers worked out ahead, found none
    assert wrong_calls(server, keys, serials) == CALLS * 3
    assert impl.looked_up == CALLS


def test_a_round_that_starts_a_turn_keeps_only_the_latest_round_of_the_one_before() -> None:
    server, _ = server_of()
    first = server.round(CALLS, turn_keys(1)[0]).serial
    second = server.round(CALLS, turn_keys(1, 2000)[0], True).serial
    assert set(server.stash) == {first, second}
    third = server.round(CALLS, turn_keys(1, 3000)[0]).serial
    assert set(server.stash) == {second, third}


@pytest.mark.parametrize("follows", [False, True])
def test_the_honest_features_answer_every_round_right_either_way(follows: bool) -> None:
    server, impl = server_of()
    honest_impl = impl.inner
    server.runner.impl = honest_impl
    keys = turn_keys(3)
    serials = []
    for i, round_keys in enumerate(keys):
        serials.append(server.round(CALLS, round_keys, follows and i > 0).serial)
    kept = [s for s in serials if s in server.stash]
    assert wrong_calls(server, keys[-len(kept):], kept) == 0


# -- training: each step's batch, fed as it is called ------------------------------------------

def train_server(name: str = "honest") -> CaseServer:
    workload = catalogue.load_workload(CHEATS / name)
    shape, task = workload.sizes["smoke"][0], workload.all_tasks[0]
    cid = CaseId(workload, shape, task, "numpy", "eager", "cpu", "fp32")
    return CaseServer(frameworks.load("numpy", frameworks.BUILTIN),
                      CaseSpec.of(cid, str(CHEATS), "smoke", 0))


def lin_steps(server: CaseServer, w: np.ndarray, keys: list[int]) -> np.ndarray:
    """The honest least-squares steps on each key's batch, in NumPy at float32."""
    lr = server.id.task.optimizer.lr
    for key in keys:
        found = data.batch(server.id.workload, server.id.shape, server.inputs, key)
        x, y = found["x"], found["y"]
        w = w - lr * (x.T @ (x @ w - y) / len(y))
    return w


def test_a_training_round_steps_on_the_batches_of_its_keys_and_checks_use_the_seeded_data(
        ) -> None:
    server = train_server()
    start = server.runner.params()["w"]
    keys = [11, 12, 13, 14]
    server.round(4, keys)
    found = server.runner.params()["w"]
    np.testing.assert_allclose(found, lin_steps(server, start, keys), rtol=1e-5, atol=1e-6)
    assert not np.allclose(found, lin_steps(server, start, [0] * 4), rtol=1e-5, atol=1e-6)
    # loss and gradient are checked on the seeded data, whatever batch a step left
    loss = float(server.evaluate(0).loss)
    x, y = server.inputs["x"], server.inputs["y"]
    r = x @ found - y
    assert loss == pytest.approx(0.5 * float(np.mean(r * r)), rel=1e-5)


def test_a_pinning_warm_up_rehearses_training_without_a_step() -> None:
    """The repeats of a pinning warm-up (framework_worker.learn_and_pin) take no step in a
    training case, so every case of a pass has made as many steps when timing starts."""
    server = train_server()
    again = server.rehearsal()
    assert again is not None
    before = server.runner.params()["w"]
    again()
    again()
    assert server.runner.calls == 0
    np.testing.assert_array_equal(server.runner.params()["w"], before)
    assert server_of()[0].rehearsal() is None  # inference repeats its round
