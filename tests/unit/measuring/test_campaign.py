"""Timed turns: the first round after a worker resumes is run and dropped, and the campaign
plans rounds, turns and audits so that dropped rounds never shorten what is recorded.
A fake pool stands in for the worker: nothing here depends on how fast anything runs. Last,
which pools a campaign starts with a pass, and which of them warm their compiler up."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import frameworks
from pytest_mlbench.checking.oracle_client import OracleService
from pytest_mlbench.engine import protocol
from pytest_mlbench.engine.pools import PoolKey, Side
from pytest_mlbench.measuring import case_run as pipeline
from pytest_mlbench.measuring import schedule
from pytest_mlbench.measuring.campaign import Campaign, Lane, Plan
from pytest_mlbench.measuring.ledger import RecordedRound, RoundLedger
from pytest_mlbench.workloads import catalogue, data
from pytest_mlbench.workloads.case import CaseId

SUITES = Path(__file__).resolve().parents[3] / "suites"


class FakePool:
    """Answers "round" with a cold first round (10x) and warm ones after it, and "fetch"
    with what it kept of every round (the digests are those of what it keeps)."""

    def __init__(self, pretouched: tuple[Any, ...] = ()) -> None:
        self.calls: list[int] = []  # the serial of each round command's round
        self.turns: list[list[int]] = []  # the serials of each turn (commands that follow)
        self.keys: list[Any] = []  # the probe keys each round command carried
        self.fetched: list[list[int]] = []  # the serials each fetch asked for
        self.pretouched = list(pretouched)  # what each turn's pre-touch check did
        self.bare: list[list[int]] = []  # each bare loop's keys
        self.serial = 0
        self.info: list[Any] = []

    @staticmethod
    def per_worker_threads(world: int) -> int:
        return 1

    def case(self, handle: int, command: Any, timeout: float | None = None) -> list[Any]:
        if isinstance(command, protocol.Fetch):
            self.fetched.append([self.serial - back for back, _ in command.wanted])
            return [protocol.Fetched([self.result() for _ in command.wanted])]
        if isinstance(command, protocol.BareLoop):
            self.bare.append(list(command.keys))
            return [protocol.Seconds(0.5)]
        assert isinstance(command, protocol.Round)
        follows = command.follows
        self.serial += 1
        self.calls.append(self.serial)
        self.keys.append(command.keys)
        if follows:
            self.turns[-1].append(self.serial)
        else:
            self.turns.append([self.serial])
        seconds = 1.0 if follows else 10.0
        again = None if follows or not self.pretouched else self.pretouched.pop(0)
        return [protocol.RoundRan(seconds=seconds, serial=self.serial,
                                  digest=data.digest({}, {}), faults=0, steps=None,  # no count
                                  pretouched=again, span=seconds, outside=0.0)]

    @staticmethod
    def result() -> dict[str, Any]:
        return {"params": {}, "state": {}, "steps": 0}


def case_run(pool: FakePool, kind: str = "train", calls: int = 1) -> pipeline.CaseRun:
    cid = SimpleNamespace(task=SimpleNamespace(kind=kind), device="cpu",
                          shape=SimpleNamespace(label="s"),
                          workload=SimpleNamespace(name="fake", data_key="", check_steps=3))
    ctx = SimpleNamespace(cid=cid, where="fake", reference=SimpleNamespace(seed=0))
    run = pipeline.CaseRun(ctx, pool, SimpleNamespace(name="fake"),  # type: ignore[arg-type]
                           calls=calls)
    run.handle, run.round_s = 1, 1.0
    return run


def test_each_turn_drops_its_first_round_and_records_the_rest() -> None:
    pool = FakePool()
    run = case_run(pool)
    assert run.turn(3) == [1.0, 1.0, 1.0]
    assert run.turn(2) == [1.0, 1.0]
    assert run.ledger.seconds == [1.0] * 5 and 10.0 not in run.ledger.seconds
    # rounds are numbered through the dropped ones: 1-4, then 5-7, one command each
    assert pool.turns == [[1, 2, 3, 4], [5, 6, 7]]
    assert pool.calls == list(range(1, 8))
    assert run.ledger.rounds_done == 7


def test_each_round_gets_its_probe_keys_only_in_its_own_command() -> None:
    """Inference and transforms: a turn is one command a round, each carrying that round's
    probe keys alone, so the worker cannot work out a later round's answers in an earlier
    one (the turn's dropped first round included); every key is new."""
    pool = FakePool()
    run = case_run(pool, kind="infer", calls=3)
    run._fetch = lambda numbers: None  # type: ignore[method-assign]  # the keys alone here
    run.turn(3)
    run.turn(2)
    # each turn's dropped round makes one call (case_run.DROPPED_CALLS), the others three
    assert len(pool.keys) == 7
    assert [len(k) for k in pool.keys] == [1, 3, 3, 3, 1, 3, 3]
    flat = [key for keys in pool.keys for key in keys]
    assert len(set(flat)) == len(flat) and 0 not in flat
    assert [run.schedule.keys[r] for r in range(1, 8)] == pool.keys


def test_a_dropped_round_can_be_audited_like_any_other() -> None:
    pool = FakePool()
    run = case_run(pool)
    run.audits = {5}  # the first, dropped round of the second turn
    run.turn(3)
    run.turn(2)
    # fetched after its turn with the state it started from (round 4, the turn before's);
    # the first turn, unaudited, fetched a decoy all the same, kept nowhere
    assert len(pool.fetched) == 2 and len(pool.fetched[0]) in (1, 2)
    assert pool.fetched[1] == [4, 5]
    assert set(run.kept) == {4, 5}


def test_turns_that_pretouched_the_heap_again_are_counted_in_the_heap_record() -> None:
    """The worker checks its heap before each turn (allocator.pretouch_again); the case's
    heap record says how many of its turns found it changed and pre-touched again."""
    run = case_run(FakePool((None, {"pretouched": True}, None, {"pretouched": True})))
    run.heap = {"pretouched": True, "heap_mb": 100.0}
    for _ in range(4):
        run.turn(2)
    assert run.heap == {"pretouched": True, "heap_mb": 100.0, "again": 2}


def test_a_re_pretouch_that_failed_is_not_counted_and_says_why() -> None:
    """A worker that found its heap changed but could not pre-touch it again (no memory for
    the headroom, say) did not leave the heap pre-touched: the turn is not counted in
    ``again``, and the record keeps why."""
    why = "no memory for a 64 MB headroom"
    run = case_run(FakePool(({"pretouched": True}, {"pretouched": False, "why": why}, None)))
    run.heap = {"pretouched": True, "heap_mb": 100.0}
    for _ in range(3):
        run.turn(2)
    assert run.heap == {"pretouched": True, "heap_mb": 100.0, "again": 1, "again_failed": why}


def test_without_dropping_every_round_is_recorded() -> None:
    run = case_run(FakePool())
    assert run.turn(2, discard=0) == [10.0, 1.0]


# -- which pools start, and warm a compiler up -------------------------------------------------

def campaign_of(timing: bool) -> Campaign:
    """A campaign of the smoke mlp in torch (eager and jit) and numpy (eager); nothing runs."""
    workload = catalogue.load_workload(SUITES / "mlp")
    shape, task = workload.sizes["smoke"][0], workload.all_tasks[0]
    cases = tuple(CaseId(workload, shape, task, fw, variant, "cpu", "fp32")
                  for fw, variant in (("torch", "eager"), ("torch", "jit"), ("numpy", "eager")))
    lane = Lane(Side(), catalogue.Catalogue(SUITES, (workload,)), cases)
    plan = Plan(timing=timing, processes=3, threads=1, affinity="off", seed=0, size="smoke",
                max_time=1.0, min_rounds=5)
    return Campaign([lane], plan, frameworks.BUILTIN, OracleService())


def test_only_a_timed_campaign_warms_compilers_up_and_only_for_compiled_cases() -> None:
    """The warm-up keeps a compiler's start-up out of the first case's reported compile time;
    a session that times nothing reports no compile time, so its workers skip it (inductor's
    first C++ build is seconds of CPU per worker)."""
    timed, unchecked = campaign_of(True), campaign_of(False)
    torch_key, numpy_key = (PoolKey(fw, 1, "", 0) for fw in ("torch", "numpy"))
    assert timed._compiled(torch_key) and not timed._compiled(numpy_key)
    assert not unchecked._compiled(torch_key) and not unchecked._compiled(numpy_key)
    assert not any(unchecked._compiled(k) for k in {k for s in unchecked.states.values()
                                                    for k in unchecked._slots(s)})


def test_a_parallel_layout_gets_one_pool_where_single_devices_get_one_a_core() -> None:
    """A session that times nothing keeps a pool of each framework per core for its
    single-device cases; a parallel case's pool already takes a core a worker, so it has one
    (two would start twice the ranks and oversubscribe the cores)."""
    unchecked = campaign_of(False)
    single = next(iter(unchecked.states.values()))
    parallel = replace(single, cid=replace(single.cid, workers=2, strategy="fsdp"))
    assert len(unchecked._slots(single)) == unchecked.untimed.width
    assert unchecked._slots(parallel) == (PoolKey("torch", 2, "", 0),)


def test_a_gpu_case_gets_at_most_two_pools_of_its_framework(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On a 16-core GPU machine a pool a core started 16 CUDA contexts a framework on the one
    device; a GPU case's framework keeps GPU_SLOTS (two), a CPU case's one a core."""
    from pytest_mlbench.measuring.campaign import GPU_SLOTS

    unchecked = campaign_of(False)
    monkeypatch.setattr(unchecked.untimed, "width", 16)
    single = next(iter(unchecked.states.values()))
    on_gpu = replace(single, cid=replace(single.cid, device="gpu"))
    assert len(unchecked._slots(single)) == 16
    assert unchecked._slots(on_gpu) == tuple(PoolKey("torch", 1, "", i) for i in range(GPU_SLOTS))
    assert GPU_SLOTS == 2


def test_only_the_first_pass_warms_compilers_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compile time is reported from the first pass alone (cold, once): the pools of later
    passes start without the warm-up, and those of the first pass with it."""
    campaign, started = campaign_of(True), []
    monkeypatch.setattr(campaign.pools, "new", lambda key, side, compiler: started.append(
        (campaign.pass_no, key.framework, compiler)) or FailingPool())
    monkeypatch.setattr(campaign.host, "take", lambda: None)
    monkeypatch.setattr(campaign, "_groups", lambda: [])  # no case runs: only the pools start
    for p in range(3):
        campaign._pass(p)
    # on the device its compiled cases run on ("" for no warm-up)
    assert started == [(p, fw, "cpu" if p == 0 and fw == "torch" else "") for p in range(3)
                       for fw in ("torch", "numpy")]


class FailingPool:
    """A pool whose process never starts (the pass goes on without it)."""

    key, pool = None, None

    def spawn(self) -> None:
        raise OSError("not started in this test")

    def close(self, kill: bool = False) -> None:
        pass


def test_a_campaign_that_times_nothing_starts_one_pool_a_framework_and_spares_on_demand(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Spare pools of a framework (a session that times nothing) are not spawned with the
    rest: importing TensorFlow twice is seconds of CPU that a job may never need."""
    spawned: list[PoolKey] = []

    class Pool:
        def __init__(self, key: PoolKey) -> None:
            self.key, self.pool = key, None

        def spawn(self) -> None:
            spawned.append(self.key)

        def started(self) -> None:
            self.pool = object()

    campaign = campaign_of(False)
    monkeypatch.setattr(campaign.untimed, "width", 2)
    monkeypatch.setattr(campaign.pools, "new", lambda key, side, compiler: Pool(key))
    campaign._start_pools(0)
    assert sorted(k.framework for k in spawned) == ["numpy", "torch"]
    assert all(k.slot == 0 for k in spawned)
    spare = campaign._slots(next(iter(campaign.states.values())))[1]
    assert spare.slot == 1 and spare not in campaign.pools


def pass_of_one_group(monkeypatch: pytest.MonkeyPatch, timing: Any) -> tuple[Campaign, list[str]]:
    """A timed campaign whose one group prepares two runs and times them with ``timing``
    (called with the runs and the campaign); no pool or worker starts."""
    campaign, lines = campaign_of(True), []
    states = list(campaign.states.values())
    runs = [case_run(FakePool()) for _ in range(2)]
    prepared = iter([runs, []])
    monkeypatch.setattr(campaign.host, "take", lambda: None)
    monkeypatch.setattr(campaign, "_start_pools", lambda p: None)
    monkeypatch.setattr(campaign, "_groups", lambda: [("mlp", states)])
    monkeypatch.setattr(campaign, "_untimed_phase", lambda finish, prepare, p: next(prepared))
    monkeypatch.setattr(campaign, "rounds_for", lambda run: 5)
    monkeypatch.setattr(campaign, "_measure_peaks", lambda runs, p: None)
    monkeypatch.setattr(campaign, "_interleave", lambda runs, p: timing(runs, campaign))
    monkeypatch.setattr(campaign.progress, "write", lines.append)
    return campaign, lines


def test_the_progress_line_counts_the_cases_that_recorded_timed_rounds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the cases prepared: a GPU session cut in its untimed phase said "9 case(s)
    checked and timed" with nothing timed."""
    def one_timed(runs: list[pipeline.CaseRun], campaign: Campaign) -> None:
        runs[0].ledger.recorded.append(RecordedRound(0.1, 0, 0))

    campaign, lines = pass_of_one_group(monkeypatch, one_timed)
    campaign._pass(0)
    assert len(lines) == 1 and ": 1 case(s) checked and timed in" in lines[0], lines


def test_a_cancelled_pass_prints_no_verdicts_for_the_group_it_cut(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After a cancel the group's cases end in errors of the cancel's making (their workers
    killed under them: "exited with signal 9 ... the out-of-memory killer?"), not theirs."""
    def cancelled(runs: list[pipeline.CaseRun], campaign: Campaign) -> None:
        campaign.cancelled = True

    campaign, lines = pass_of_one_group(monkeypatch, cancelled)
    with pytest.raises(KeyboardInterrupt, match="cancelled"):
        campaign._pass(0)
    assert lines == []


def test_a_campaign_counts_its_groups_and_passes_for_the_progress_line() -> None:
    assert (campaign_of(True).progress.groups, campaign_of(True).progress.passes) == (1, 3)
    assert campaign_of(False).progress.passes == 1


@pytest.mark.parametrize("rounds", [1, 3, 4, 5, 6, 7, 12, 13, 40])
@pytest.mark.parametrize("calls", [1, 8])
def test_a_pass_shares_its_rounds_out_evenly_over_its_turns(
        rounds: int, calls: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A case takes a turn in every cycle it has a round for, one recorded round a turn at
    least (after its dropped one): a 5-round case takes five turns of one, where two rounds a
    turn at least gave it 2 and 3, all its rounds at two moments of the pass (vit's torch-jit
    in the main job). Where one call is a whole round, its turns record two rounds each
    (the dropped call half of them, not all), spread over the pass's cycles. The turns add
    up to the pass's rounds; an A/B pair's sides take the same turns, the side that goes
    first alternating turn by turn."""
    campaign = campaign_of(True)
    run = lambda side: SimpleNamespace(  # noqa: E731
        ctx=SimpleNamespace(cid=SimpleNamespace(name="c")), spec=SimpleNamespace(name="c"),
        side=side, schedule=SimpleNamespace(secret=7), seconds=[], audits=set(), calls=calls)
    base, head = run("base"), run("head")
    monkeypatch.setattr(campaign, "rounds_for", lambda r: rounds)
    taken: list[tuple[str, int, int, bool]] = []

    def turn(r: Any, count: int, cycle: int, last: bool = False) -> None:
        taken.append((r.side, count, cycle, last))
        r.seconds += [1.0] * count

    monkeypatch.setattr(campaign, "_turn", turn)
    campaign._interleave([base, head], 0)  # type: ignore[list-item]
    counts = [count for side, count, _, _ in taken if side == "base"]
    cycles = [cycle for side, _, cycle, _ in taken if side == "base"]
    per_turn = 2 if calls == 1 else 1
    assert sum(counts) == len(base.seconds) == len(head.seconds) == rounds
    assert len(counts) == min(max(rounds // per_turn, 1), schedule.CYCLES)
    assert min(counts) >= min(per_turn, rounds) and max(counts) - min(counts) <= 1
    assert cycles[0] == 0 and (len(cycles) < 2 or cycles[-1] >= schedule.CYCLES // 2)
    assert [last for side, _, _, last in taken if side == "base"] == [
        False] * (len(counts) - 1) + [True]
    assert [side for side, *_ in taken][0::2] == [("base", "head")[k % 2]
                                                  for k in range(len(counts))]
    assert base.audits and head.audits


def test_a_turn_drops_at_most_half_what_it_records() -> None:
    """A turn's dropped call costs at most DROPPED_SHARE of its recorded rounds: one round of
    many calls, two rounds where one call is a round; spread over the cycles, zeros skipped
    in the rounds' numbers."""
    assert schedule.turn_rounds(1, 1) == 2 and schedule.turn_rounds(2, 1) == 1
    assert schedule.turn_rounds(40, 1) == 1
    assert schedule.turns(6, per_turn=2) == [2, 0, 2, 0, 2, 0]
    assert schedule.turns(7, per_turn=2) == [2, 0, 2, 0, 3, 0]
    assert schedule.turns(12, per_turn=2) == [2, 2, 2, 2, 2, 2]
    assert schedule.turns(8) == [1, 1, 2, 1, 1, 2]
    assert schedule.recorded_numbers([2, 0, 2, 0, 2, 0], 1) == [2, 3, 5, 6, 8, 9]


def test_a_process_records_its_share_of_the_time_and_a_round_in_every_cycle() -> None:
    """--benchmark-max-time and --benchmark-min-rounds are the whole case's, over its
    processes, and a process records one round in every cycle at least; a shape's fixed count
    is shared out too (a shape so large it fixes its rounds takes fewer turns)."""
    assert schedule.rounds_per_process(None, 0.01, 3, 0.6, 5) == 20  # 0.2 s of 10 ms rounds
    assert schedule.rounds_per_process(None, 1.0, 3, 0.6, 5) == schedule.CYCLES
    assert schedule.rounds_per_process(None, 0.034, 3, 0.5, 5) == schedule.CYCLES  # not 5
    assert schedule.rounds_per_process(None, 1.0, 2, 0.6, 20) == 10  # min rounds, shared
    assert schedule.rounds_per_process(7, 0.01, 3, 100.0, 5) == 3  # fixed: ceil(7 / 3)


def test_audited_rounds_replay_from_the_secret_and_grow_with_the_rounds() -> None:
    rounds = range(1, 121)
    chosen = schedule.audited_rounds(0, "mlp-numpy-eager-cpu-fp32", 0, rounds)
    assert chosen == schedule.audited_rounds(0, "mlp-numpy-eager-cpu-fp32", 0, rounds)
    assert len(chosen) == 1 + 120 // schedule.AUDIT_EVERY and chosen <= set(rounds)
    assert len(schedule.audited_rounds(0, "c", 0, [1])) == 1
    others = {frozenset(schedule.audited_rounds(0, "mlp-numpy-eager-cpu-fp32", p, rounds))
              for p in range(1, 6)}
    assert others - {frozenset(chosen)}  # another pass audits other rounds


def test_a_turns_dropped_round_is_never_audited() -> None:
    """A dropped round is one call right after the worker resumed, which the worker can
    tell: an audit there judges only what a cheater chose to do honestly."""
    counts = [1, 1, 2, 1, 1, 2]
    recorded = schedule.recorded_numbers(counts, 1)
    assert recorded == [2, 4, 6, 7, 9, 11, 13, 14]
    for secret in range(200):
        assert schedule.audited_rounds(secret, "c", 0, recorded) <= set(recorded)


def test_each_case_run_draws_its_own_secret_which_the_worker_never_receives() -> None:
    """The audited rounds come from a secret drawn in the parent (KeySchedule.secret),
    not from the session's seed a worker knows; no command sent to the worker carries it,
    the round numbers, or which rounds are audited."""
    pool = FakePool()
    runs = [case_run(pool) for _ in range(2)]
    assert runs[0].schedule.secret != runs[1].schedule.secret
    runs[0].audits = {2}
    runs[0].turn(3)
    assert pool.turns == [[1, 2, 3, 4]] and pool.fetched == [[1, 2]]  # after the turn


def test_a_worker_whose_results_changed_after_its_turn_fails() -> None:
    class Changing(FakePool):
        @staticmethod
        def result() -> dict[str, Any]:
            return {"params": {"w": np.ones(1)}, "state": {}, "steps": 0}

    run = case_run(Changing())
    run.audits = {1}
    with pytest.raises(AssertionError, match="changed after the clock stopped"):
        run.turn(1)


# -- what a round's clock holds, and the parent's clock against the worker's -------------------

def test_a_round_result_is_made_numpy_only_from_the_frameworks_own_types() -> None:
    """Inside the clock the adapter converts the framework's own arrays; any other object is
    refused before it is converted (its conversion could run owed work untimed)."""
    from pytest_mlbench.engine import runners
    from pytest_mlbench.frameworks.numpy_ import NumpyAdapter

    adapter = NumpyAdapter()
    accepted = runners.concrete_types(adapter)
    found = runners.concrete(adapter, np.ones(2), "x", accepted)
    assert isinstance(found, np.ndarray) and found.tolist() == [1.0, 1.0]
    assert runners.concrete(adapter, 0.5, "loss", accepted) == 0.5

    class Duck:
        def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
            raise AssertionError("converted")

    with pytest.raises(runners.NotConcrete, match=r"x is a \S+Duck, not one of numpy's own "
                                                  r"concrete arrays .*work owed, not done"):
        runners.concrete(adapter, Duck(), "x", accepted)
    with pytest.raises(runners.NotConcrete):  # a subclass is not the type
        runners.concrete(adapter, np.ones(2).view(np.ma.MaskedArray), "x", accepted)


def test_the_worker_clock_must_cover_half_the_parents_time_less_a_slack_a_turn() -> None:
    from pytest_mlbench.checking import audit

    honest = audit.Clock(parent_s=2.0, worker_s=1.9, timed_s=1.5, turns=12, commands=12)
    audit.assert_clocks_agree(honest, where="fake")
    stalled = audit.Clock(parent_s=0.3, worker_s=0.01, timed_s=0.005, turns=12, commands=12)
    audit.assert_clocks_agree(stalled, where="fake")  # a busy host: within the slack
    quarter = audit.Clock(parent_s=2.0, worker_s=0.5, timed_s=0.4, turns=4, commands=4)
    with pytest.raises(AssertionError, match="the worker's clock disagrees with the parent's"):
        audit.assert_clocks_agree(quarter, where="fake")
    # a turn is one command a round: each further command's message there and back is
    # allowed for (a few milliseconds), not a whole turn's slack
    chatty = audit.Clock(parent_s=0.6, worker_s=0.05, timed_s=0.04, turns=2, commands=200)
    audit.assert_clocks_agree(chatty, where="fake")
    quarter_chatty = replace(quarter, commands=40)
    with pytest.raises(AssertionError, match=r"0.005 s for each of 36 further round command"):
        audit.assert_clocks_agree(quarter_chatty, where="fake")


def test_ranks_entering_their_rounds_apart_are_not_read_as_a_clock_going_back() -> None:
    """A parallel case's rounds are each the slowest rank's; their sum may exceed any rank's
    span when the ranks start a little apart (a dp-w2 case on a busy host failed so). Each
    rank's own rounds are held to the spans; one rank whose rounds outgrow its span fails."""
    from pytest_mlbench.checking import audit

    def rank(seconds: float, span: float) -> SimpleNamespace:
        return SimpleNamespace(seconds=seconds, span=span, outside=0.0, after=0.0)

    # two rounds, each replied to by two ranks: their seconds 0.10 and 0.05, then 0.05 and 0.10
    apart = RoundLedger()
    apart.clocked(0.25, [[rank(0.10, 0.08), rank(0.05, 0.08)],  # type: ignore[list-item]
                         [rank(0.05, 0.08), rank(0.10, 0.08)]], [0.10, 0.10])
    assert apart.clock.timed_s == pytest.approx(0.15)  # each rank's own, not 0.20
    audit.assert_clocks_agree(apart.clock, where="fake")
    back = RoundLedger()
    back.clocked(0.25, [[rank(0.10, 0.08)], [rank(0.10, 0.08)]],  # type: ignore[list-item]
                 [0.10, 0.10])
    with pytest.raises(AssertionError, match="the clock is not monotonic"):
        audit.assert_clocks_agree(back.clock, where="fake")


def test_each_training_round_gets_the_batch_keys_of_its_own_steps_only() -> None:
    """Training: each round command carries one batch key a step, for the steps it makes
    (counted from the seeded start, after the checked steps, which keep the seeded data);
    the keys come from the pass's data secret, so two cases of a pass get the same ones and
    share a reference trajectory, and another pass gets others."""
    pool = FakePool()
    run = case_run(pool, calls=2)
    run.schedule.data_secret, run.schedule.steps_sent = 7, 3  # after the 3 checked steps
    run.turn(2)
    keys = pool.keys
    assert [len(k) for k in keys] == [1, 2, 2]  # the dropped round: one step
    flat = [key for k in keys for key in k]
    assert 0 not in flat and len(set(flat)) == len(flat)
    cid = run.ctx.cid
    assert flat == [data.step_key(7, cid.workload, cid.shape, n) for n in range(4, 9)]
    assert [data.step_key(7, cid.workload, cid.shape, n) for n in (1, 2, 3)] == [0, 0, 0]
    assert data.step_key(8, cid.workload, cid.shape, 4) != flat[0]


def test_a_worker_whose_step_count_differs_from_the_batches_sent_fails() -> None:
    class Extra(FakePool):
        def case(self, *args: Any, **kwargs: Any) -> Any:
            found = super().case(*args, **kwargs)
            if isinstance(args[1], protocol.Round):
                found[0] = replace(found[0], steps=99)
            return found

    run = case_run(Extra())
    with pytest.raises(AssertionError, match=r"the worker has made 99 training step\(s\) "
                                             r"where the harness sent the batches of 1"):
        run.turn(1, discard=0)


def test_a_specs_own_pytest_skip_makes_its_case_skipped_not_failed() -> None:
    """vit's reference calls pytest.skip when autograd is missing (a GPU machine without it):
    the case reported 'Failed: ... Skipped: ...' until the campaign took pytest's skip for
    what it is."""
    campaign = campaign_of(False)
    state = next(iter(campaign.states.values()))
    with pytest.raises(pytest.skip.Exception) as caught:
        pytest.skip("the vit reference is differentiated by autograd")
    campaign._fail(state, caught.value)
    assert state.outcome is not None and state.outcome.status == "skipped"
    assert state.outcome.message == "the vit reference is differentiated by autograd"


def test_a_timed_round_is_calibrated_to_last_long_enough_for_its_sync() -> None:
    """A round's calls: the shape's steps_per_call times the smallest whole factor that makes
    it last CALIBRATED_ROUND_S (a GPU's step of 1.3 ms: 8 calls, where one call a round paid
    a host round trip each), capped; a round already that long is left as it is."""
    assert pipeline.calibrated_calls(1, 0.0013) == 8
    assert pipeline.calibrated_calls(4, 0.002) == 20  # 4 calls of 0.5 ms: five times that
    assert pipeline.calibrated_calls(10, 0.5) == 10
    assert pipeline.calibrated_calls(1, 1e-9) == pipeline.CALLS_FACTOR_MAX


def test_warm_up_rounds_calibrate_again_until_the_calls_stop_growing() -> None:
    """The first warm-up round is slow (its first calls): calibrated on it alone a 25 us
    step's rounds lasted 3 ms. Each round at the calls the last calibrated calibrates again;
    the calls never shrink, and the last allowed round calibrates nothing."""
    run = SimpleNamespace(steps_per_call=4, calls=4)
    calibrate = pipeline.CaseRun.calibrate
    assert calibrate(run, SimpleNamespace(seconds=4 * 80e-6), last=False)  # 80 us a call
    assert run.calls == 128  # 10 ms / 320 us: 32 times the shape's 4 calls
    assert calibrate(run, SimpleNamespace(seconds=128 * 25e-6), last=False)
    assert run.calls == 400
    assert not calibrate(run, SimpleNamespace(seconds=400 * 26e-6), last=False)
    assert not calibrate(run, SimpleNamespace(seconds=400 * 40e-6), last=False)
    assert run.calls == 400  # a slower round does not shrink them
    assert not calibrate(run, SimpleNamespace(seconds=400 * 1e-6), last=True)
    assert run.calls == 400


def test_a_first_warm_up_round_twice_the_target_needs_no_second() -> None:
    """A first round at the shape's calls that lasted twice the round target calibrates to
    the shape's calls even if the next ran twice as fast: no second warm-up round (a whole
    step of a long one). A shorter one, or one that ran more calls, is calibrated again."""
    target = pipeline.CALIBRATED_ROUND_S
    assert pipeline.settled(2 * target, 10, 10) and pipeline.settled(0.4, 1, 1)
    assert not pipeline.settled(1.9 * target, 10, 10)  # a next round at 0.95 target: 2 calls
    assert not pipeline.settled(3 * target, 20, 10)  # already calibrated once
    for seconds in (2 * target, 1.9 * target):  # at half the time, the calls it would take
        grown = pipeline.calibrated_calls(10, seconds / 2) > 10
        assert grown == (not pipeline.settled(seconds, 10, 10))


def test_a_bare_loop_after_a_turn_is_replayed_by_the_next_rounds_audit() -> None:
    """Training: the bare loop after a turn takes steps of its own (their batches the next
    steps' keys, which the worker counts); the round after it starts from the state they
    left, so its audit replays them from the round before: the loop's keys, then its own."""
    pool = FakePool()
    run = case_run(pool, calls=2)
    run.schedule.data_secret = 7
    run.turn(1)
    run.bare_loop()
    run.turn(1)
    (bare,) = pool.bare
    assert len(bare) == 2 and run.bare_s == [0.5]
    # rounds 1-2 the first turn, 3 the next one's first
    assert run.schedule.bare_before == {3: bare}
    # two turns of a dropped round (one step) and a recorded one (two), the loop's two
    assert run.schedule.steps_sent == 2 * (1 + 2) + 2


def test_a_turns_dropped_round_makes_one_call_not_a_calibrated_rounds() -> None:
    """The round a turn drops (the worker just resumed) makes one call; the recorded ones the
    calibrated count; an audit of the dropped round judges its own calls (training: the steps
    its keys name)."""
    pool = FakePool()
    run = case_run(pool, calls=8)
    run.steps_per_call = 2
    run.turn(2)
    assert [len(k) for k in pool.keys] == [1, 8, 8]
    assert run.ledger.round_calls == {1: 1, 2: 8, 3: 8} and run.schedule.steps_sent == 17


class Preparing(FakePool):
    """Answers what a case's preparation asks, and says which checks' commands came."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []
        self.pool = None  # no process pool: nothing pinned

    def open(self, spec: Any) -> int:
        return 1

    def case(self, handle: int, command: Any, timeout: float | None = None) -> list[Any]:
        self.asked.append(type(command).__name__)
        if isinstance(command, protocol.Round | protocol.Fetch | protocol.BareLoop):
            return super().case(handle, command, timeout)
        return [SimpleNamespace(value=0.0, facts={})]


@pytest.mark.parametrize("full", [True, False])
def test_a_later_pass_checks_what_a_fresh_process_can_change_and_not_the_code_again(
        monkeypatch: pytest.MonkeyPatch, full: bool) -> None:
    """The first pass checks the start and the code's gradient and steps; a later pass the
    start (bytes, dtypes, census, threads) alone, and times at the first pass's calibration
    with one warm-up round."""
    checked: list[str] = []
    monkeypatch.setattr(pipeline.phases, "check_start", lambda ctx, s: checked.append("start"))
    monkeypatch.setattr(pipeline.CaseRun, "_prepare_train",
                        lambda self: checked.append("gradient and steps"))
    monkeypatch.setattr(pipeline.CaseRun, "_checked_steps",
                        lambda self: checked.append("steps, not judged"))
    monkeypatch.setattr(pipeline.CaseRun, "_gradient", lambda self, key=0: None)
    pool = Preparing()
    run = case_run(pool, calls=4)
    run.full, run.calibrated, run.round_s = full, not full, 0.04 if not full else 0.0
    run.prepare(1, pin=False)
    assert checked == (["start", "gradient and steps"] if full
                       else ["start", "steps, not judged"])
    # the fake's first round lasts 10 s at the shape's calls: settled, a first pass's too
    assert pool.asked.count("Round") == 1
    assert run.calls == 4 or full
