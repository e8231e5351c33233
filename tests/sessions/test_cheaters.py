"""Issue 9: cheating and buggy implementations of every class, run through the real plugin and
engine, each caught with a message naming framework, variant, case and what differed; honest
implementations of every framework pass the same sessions; audited rounds cannot be foreseen.

The implementations are in tests/cheats/ (one workload folder per way of cheating), copied to a
temporary suites root for each session (cheat_session.py). One session (``checked``, in
conftest.py, shared with test_checks.py) checks every class with --benchmark-disable (nothing
timed, every check, one audited round); a second, timed on a tiny shape, shows what needs
timing: plausibility against the measured peak, and audits drawn at random. No test asserts on
speed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_mlbench.checking import cores
from pytest_mlbench.measuring import schedule
from tests import background
from tests.background import Command
from tests.cheat_session import Session, command, read

AUDIT = r"timed round \d+ \(audited\): the implementation did less or different work while timed"
EAGER = r"the eager variant compiled \(\d+ during (build|check|timing)\)"
POLICY = r"precision policy fp32 no longer holds after timing: "


@background.session("timed")
def timed_command(folder: Path) -> Command:
    """Timed, NumPy only, least squares at 256 x 16: a few seconds of rounds in all."""
    return command(folder, "--mlbench-workers=1", "--mlbench-processes=2",
                   "--benchmark-max-time=0.02", "--benchmark-min-rounds=5",
                   f"--benchmark-json={folder / 'run.json'}",
                   "-k", "overclaim or auditguess or honest-numpy or lag128 or aheadinfer-numpy"
                   " or clock or latecopy")


@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> Session:
    return read(background.result("timed", tmp_path_factory))


def assert_caught(session: Session, case: str, pattern: str) -> None:
    """Failed, and the message names framework and variant, the case, and what differed."""
    result = session[case]
    framework, variant = case.split("-")[1:3]
    assert result.status == "failed", f"{case} was not caught ({result.status}):\n" \
                                      f"{session.output[-2000:]}"
    assert f"{framework} {variant} ({case})" in result.message, result.message
    assert re.search(pattern, result.message), f"{case}: {result.message}"


def case(name: str, framework: str, variant: str = "eager", workers: int = 1,
         strategy: str = "dp") -> str:
    w = f"-{strategy}-w{workers}" if workers > 1 else ""
    return f"{name}-{framework}-{variant}{w}-cpu-fp32"


# -- a step that does less once the checked steps are over -------------------------------------

@pytest.mark.parametrize(("name", "what"), [
    ("noop", r"4 step\(s\) from the round's start, displacement of w: .* actual 0,"),
    ("fwdonly", r"4 step\(s\) from the round's start, displacement of w: .* actual 0,"),
    ("stalegrad", r"4 step\(s\) from the round's start, displacement of w: differs by"),
])
def test_a_step_that_stops_working_after_the_checks_fails_its_audited_round(
        checked: Session, name: str, what: str) -> None:
    assert_caught(checked, case(name, "numpy"), f"{AUDIT}.*{what}")


@pytest.mark.parametrize(("name", "framework"), [
    ("slicewarm", "jax"), ("slicewarm", "torch"), ("slicewarm", "tensorflow"),
    ("slicecold", "jax")])
def test_a_second_compiled_step_on_half_the_batch_fails_warmed_up_or_not(
        checked: Session, name: str, framework: str) -> None:
    """Warmed up in build(), nothing compiles while timed: the audit sees the half batch."""
    assert_caught(checked, case(name, framework, "jit"),
                  rf"{AUDIT}.*4 step\(s\) from the round's start, displacement of w")


def test_work_handed_to_a_thread_fails_its_audited_round(checked: Session) -> None:
    assert_caught(checked, case("thread", "numpy"), rf"{AUDIT}.*displacement of w")


def test_parameters_reported_a_step_behind_fail_their_audited_round(checked: Session) -> None:
    """On data fixed for the whole run every round looks right from a state one step behind,
    and only the count from the seeded start showed the missing step. Each timed step now has
    its own batch, so the round's reported displacement is that of the steps before it, on
    other batches, and the round's own check sees it (the count from the start, which still
    judges every audited round, is tested in tests/unit/checking/test_trajectory.py)."""
    assert_caught(checked, case("lag", "jax", "jit"),
                  rf"{AUDIT}.*4 step\(s\) from the round's start, displacement of w: differs by")


# -- implementations that look at the harness (issue 32) ---------------------------------------

OWED = (r"(params\(\) 'w'|the result of timed call \d+) is a \S+\.Owed, not one of "
        r"(numpy|torch|jax|tensorflow)'s own concrete arrays .*: work owed, not done")


@pytest.mark.parametrize(("framework", "variant"), [
    ("numpy", "eager"), ("torch", "eager"), ("torch", "jit"), ("jax", "eager"), ("jax", "jit"),
    ("tensorflow", "eager"), ("tensorflow", "jit")])
def test_results_whose_conversion_does_the_owed_work_fail(checked: Session, framework: str,
                                                          variant: str) -> None:
    """Every third step deferred to the conversion of what step() and params() return: the
    round's results are refused by type inside the clock, never converted after it."""
    assert_caught(checked, case("owed", framework, variant), OWED)


@pytest.mark.parametrize(("framework", "variant"), [
    ("numpy", "eager"), ("torch", "eager"), ("jax", "jit"), ("tensorflow", "jit")])
def test_a_step_reading_the_harness_for_the_audit_finds_nothing_and_its_skips_fail(
        checked: Session, framework: str, variant: str) -> None:
    """It looks through its callers' frames for whether the round is kept (the round number,
    a keep list); every round is read alike and the audited ones are chosen in the parent, so
    it finds nothing, skips, and the audited round shows the missing steps."""
    assert_caught(checked, case("peek", framework, variant),
                  rf"{AUDIT}.*4 step\(s\) from the round's start, displacement of w")


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax"])
def test_steps_worked_out_in_build_and_looked_up_while_timed_fail_as_work_done_ahead(
        checked: Session, framework: str) -> None:
    """build() runs the honest trainer steps ahead on the seeded data and a timed step is a
    lookup (specs.AheadSteps): every timed step's batch is drawn from a key sent only with its
    round, so the states worked out ahead are not the round's."""
    assert_caught(checked, case("aheadtrain", framework),
                  rf"{AUDIT}.*4 step\(s\) from the round's start, displacement of w: differs "
                  r"by .*; each step's batch is sent with its round, so work done ahead")


def test_a_worker_clock_replaced_to_report_less_fails_against_the_parents(
        timed: Session) -> None:
    """Judged in a timed session, where the parent's clock times the turn alone (a session
    that times nothing records the clocks without judging them)."""
    assert_caught(timed, case("clock", "numpy"),
                  r"the worker's clock disagrees with the parent's: its \d+ timed turn\(s\) took "
                  r"[\d.]+ s on the parent's clock and [\d.]+ s on the worker's")


def test_a_clock_slowed_only_for_the_rounds_own_readings_fails_against_the_others(
        timed: Session) -> None:
    """The same clock, slowed only when the timed round reads it: the worker's account of
    the turn agrees with the parent's, but not its rounds with the readings around them."""
    assert_caught(timed, case("clockshift", "numpy"),
                  r"the worker's rounds were timed at [\d.]+ s more or less than its readings "
                  r"around them show")


def test_parameters_falling_behind_after_step_128_fail_the_count_at_the_pass_end(
        timed: Session) -> None:
    """Honest for 128 steps, then a step behind. The count from the seeded start, judged for
    the whole run (the state every pass ends in, and audited rounds past step 128), shows the
    missing step; an audited round past step 128 shows it from the round's start too, each
    step having its own batch (a round a step behind moved by the steps before it)."""
    assert_caught(timed, case("lag128", "numpy"),
                  r"(\d+) step\(s\) from the seeded start \(step\(\) has been called \1 "
                  r"time\(s\).*: the parameters are nearest the reference's step (\d+), not \1"
                  r"|\d+ step\(s\) from the round's start, displacement of \w+: differs by .*; "
                  r"each step's batch is sent with its round")


@background.session("uncountable")
def uncountable_command(folder: Path) -> Command:
    """lag128 alone, where no count from the seeded start can be read (as the smoke MLP's
    could not at the step a loaded host's calibration ended on) and no round is audited at
    random: what is left to catch it is its pass's last round, judged from the round's start."""
    made = command(folder, "--mlbench-workers=1", "--mlbench-processes=1",
                   "--benchmark-max-time=0.02", "--benchmark-min-rounds=5", "-k", "lag128")
    with open(folder / "conftest.py", "a", encoding="utf-8") as conftest:
        conftest.write("\nfrom pytest_mlbench.checking import audit as _audit\n"
                       "from pytest_mlbench.measuring import schedule as _schedule\n"
                       "_audit.count_unreadable = lambda *args, **kw: 'unreadable (the test)'\n"
                       "_schedule.audited_rounds = lambda *args, **kw: set()\n")
    return made


@pytest.fixture(scope="module")
def uncountable(tmp_path_factory: pytest.TempPathFactory) -> Session:
    return read(background.result("uncountable", tmp_path_factory))


def test_a_step_behind_where_no_count_can_be_read_fails_the_pass_end_from_its_round_start(
        uncountable: Session) -> None:
    """The count at the pass end is unreadable, so its last round is judged from the round's
    start: the parameters a step behind moved by the batches before the round's."""
    assert_caught(uncountable, case("lag128", "numpy"),
                  r"timed round \d+ \(audited\): .* \d+ step\(s\) from the round's start, "
                  r"displacement of \w+: differs by .*; each step's batch is sent with its round")


# -- more cores than the session gave (issue 56) -----------------------------------------------

TURN = r"timed turn of rounds \d+-\d+: "


@pytest.mark.parametrize(("name", "framework", "what"), [
    # torch at two threads in each step, one again in params() (read as the round ends)
    ("threadsup", "torch", r"thread controls set while timed: torch\.set_num_threads\(2\) "
                           r"\(\d+ calls?\), where the session set 1 thread\(s\) on cores \[\d+\]"),
    # the same left at two: the turn's end reads it too
    ("threadsleft", "torch", r"thread controls set while timed: torch\.set_num_threads\(2\) \(1 "
                             r"call\), .*; torch\.get_num_threads\(\) reads 2 after the turn, 1 "
                             r"as the session set it"),
    # NumPy's BLAS at two threads inside threadpoolctl's limit, for each step
    ("blasup", "numpy", r"thread controls set while timed: threadpoolctl \w+ \(\S+\) "
                        r"set_num_threads\(2\) \(\d+ calls?\)"),
    # every thread on every core and torch at two threads for each step, both put back
    ("affinity", "torch", r"thread controls set while timed: os\.sched_setaffinity\(<thread>, "
                          r"\[[\d, ]+\]\) \(\d+ calls?\), torch\.set_num_threads\(2\)"),
    # half of each step in a concurrent.futures thread let onto every core through libc
    ("threadpool", "numpy", r"thread \d+ \(\S+\) may run on cores \[[\d, ]+\], the case's are "
                            r"\[\d+\]; 1 thread\(s\) held that were not when timing began"),
    # half of each step in a multiprocessing pool's process, started while free of the cores
    ("procpool", "numpy", r"child process \d+ \(\S+\) may run on cores \[[\d, ]+\], the "
                          r"case's are \[\d+\]"),
])
def test_more_cores_than_the_session_gave_fail_naming_what_was_used(
        checked: Session, name: str, framework: str, what: str) -> None:
    """Each on the seed MLP at batch 1024 (tests/cheats/morecores.py), honest in what it
    computes, after the checked steps: a control set while timed (even if put back before
    the round ends), one that reads otherwise as the turn ends, or a thread or process that
    may run past the case's cores fails the turn in one line."""
    assert_caught(checked, case(name, framework), TURN + r"(.*; )?" + what)


# -- eager means eager --------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "framework", "phase"), [
    ("eagerjit", "jax", "check"), ("eagerjit", "torch", "check"),
    ("eagerjit", "tensorflow", "check"), ("eagerscript", "torch", "build")])
def test_an_eager_variant_that_compiles_fails(checked: Session, name: str, framework: str,
                                              phase: str) -> None:
    assert_caught(checked, case(name, framework), EAGER.replace("(build|check|timing)", phase))


# -- precision ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "framework", "what"), [
    ("tf32", "torch", "torch float32 matmul precision is high, the fp32 policy needs highest"),
    ("tf32", "tensorflow", "tensorflow TF32 execution is on, the fp32 policy needs it off"),
    ("tf32", "jax", "jax matmul precision is tensorfloat32, the fp32 policy needs highest"),
    ("tf32step", "torch", r"torch precision settings were changed while the case ran \(\d+ "
                          r"call\(s\): torch._C._set_float32_matmul_precision\('high'\)"),
    ("tf32step", "tensorflow", r"tensorflow precision settings were changed while the case ran "
                               r"\(\d+ call\(s\): enable_tensor_float_32_execution\(True\)"),
    ("tf32step", "jax", r"jax precision settings were changed while the case ran \(\d+ "
                        r"call\(s\): jax_default_matmul_precision='bfloat16'"),
    ("x64", "jax", "jax_enable_x64 is True, the fp32 policy needs False"),
])
def test_precision_changed_after_the_adapters_check_fails(checked: Session, name: str,
                                                          framework: str, what: str) -> None:
    """Switched on in build() and left on, or on for each step and off before returning."""
    assert_caught(checked, case(name, framework), POLICY + what)


def test_parameters_drifting_to_float64_fail(checked: Session) -> None:
    assert_caught(checked, case("f64drift", "numpy"),
                  r"params after timing: dtype is not the policy's float32: \{'w': 'float64'\}")


# -- mixed precision that is not ------------------------------------------------------------------

@pytest.mark.parametrize(("framework", "variant"), [
    ("jax", "eager"), ("jax", "jit"), ("torch", "eager"), ("tensorflow", "eager")])
@pytest.mark.parametrize(("policy", "compute"), [("amp", "bfloat16"), ("amp16", "float16")])
def test_amp_claimed_over_float32_arithmetic_fails_saying_the_compute_was_float32(
        checked: Session, framework: str, variant: str, policy: str, compute: str) -> None:
    assert_caught(checked, f"ampf32-{framework}-{variant}-cpu-{policy}",
                  rf"gradient at the start: the arithmetic ran in float32, not the {compute} "
                  rf"compute the {policy} policy claims: a relative error of \S+ against the "
                  r"float64 reference over 16512 elements")


@pytest.mark.parametrize("framework", ["jax", "torch", "tensorflow"])
def test_amp16_without_loss_scaling_fails_saying_what_amp16_trains_with(
        checked: Session, framework: str) -> None:
    variant = "jit" if framework == "jax" else "eager"
    assert_caught(checked, f"ampnoscale-{framework}-{variant}-cpu-amp16",
                  r"after timing: the amp16 policy trains with a dynamic loss scale, and this "
                  r"trainer reports none")


@pytest.mark.parametrize(("framework", "variant"), [
    ("jax", "jit"), ("torch", "eager"), ("tensorflow", "eager")])
def test_amp_claimed_over_bfloat16_master_weights_fails_saying_what_amp_keeps(
        checked: Session, framework: str, variant: str) -> None:
    assert_caught(checked, f"ampmaster-{framework}-{variant}-cpu-amp",
                  r"params at the start: dtype is not the policy's float32: "
                  r"\{'w1': 'bfloat16', 'w2': 'bfloat16'\}; the amp policy keeps master weights "
                  r"and optimizer state at float32 and computes at bfloat16")


def test_the_honest_model_passes_amp_in_every_framework_that_has_it(checked: Session) -> None:
    """The suite's own mlp at amp in the same session (tests/cheats/ampok): the checks that
    fail the two above pass an implementation that really mixes."""
    for impl in ("jax-eager", "jax-jit", "torch-eager", "tensorflow-eager"):
        for policy in ("amp", "amp16"):
            assert checked[f"ampok-{impl}-cpu-{policy}"].status == "passed", \
                checked.output[-3000:]


def test_an_idiom_that_is_not_the_model_fails_like_any_variant(checked: Session) -> None:
    """Idioms are variants under the same checks: the GPT's fused attention without its
    causal mask (tests/cheats/sdpanomask) fails at the start."""
    assert_caught(checked, "sdpanomask-torch-eager+sdpa-cpu-fp32",
                  r"loss at the start: differs by \S+ in norm")


# -- parameters nobody reports ------------------------------------------------------------------

@pytest.mark.parametrize(("framework", "holder"), [
    ("torch", r"3 trainable nn.Parameter\(s\)"), ("tensorflow", r"3 trainable variable\(s\)"),
    ("jax", r"1 Flax variable collection\(s\)")])
def test_a_layer_api_bias_nobody_reports_fails_the_census(checked: Session, framework: str,
                                                          holder: str) -> None:
    assert_caught(checked, case("bias", framework),
                  rf"at the start: {holder} hold 16640 trainable elements, the spec's "
                  r"parameters 16512: a parameter \(a bias\?\) trains without being reported")


def test_a_hidden_bias_training_after_the_checks_fails(
        checked: Session) -> None:
    """Plain arrays: no census to ask. Either an audited round sees the parameters move
    otherwise than the reference's, or (when the audited rounds are too early to tell) the loss
    or gradient where training has taken the parameters is not the reference's there."""
    assert_caught(checked, case("hiddenbias", "numpy"),
                  rf"(loss|gradient) where training took the parameters.*: differs by|{AUDIT}")


def test_label_smoothing_fails_the_cnns_kink_wide_tolerance(checked: Session) -> None:
    """The CNN's gradient tolerance holds a few terms moved across a ReLU or pooling kink
    (suites/cnn/spec.py); label smoothing 0.1 in the loss is still caught at the start."""
    assert_caught(checked, case("smoothing", "torch"),
                  r"(loss at the start|gradient of \w+): differs by")


# -- data-parallel ------------------------------------------------------------------------------

@pytest.mark.parametrize(("framework", "variant"), [("torch", "eager"), ("jax", "jit")])
def test_a_data_parallel_step_on_part_of_the_batch_fails_its_audited_round(
        checked: Session, framework: str, variant: str) -> None:
    """torch: rank 1's data_parallel_loss halves its shard after a call count (DDP still
    averages, so the ranks agree on the wrong step); JAX: the hook's adapter switches the Mesh
    step to a second, warmed-up jitted step on half the batch."""
    assert_caught(checked, case("dpshard", framework, variant, workers=2),
                  rf"{AUDIT}.*1 step\(s\) from the round's start, displacement of w\d")


def test_data_parallel_replicas_that_drift_apart_fail(checked: Session) -> None:
    assert_caught(checked, case("dpdrift", "torch", workers=2),
                  r"rank 1 vs rank 0 .*w1: not the same bytes: \d+ of 16384 elements differ")


# -- sharded ------------------------------------------------------------------------------------

SHARDING = r"worker 0 holds [\d,]+ bytes of {what}, more than [\d,]+, what fsdp-w2 leaves a " \
           r"worker \(1\.00 of a whole copy\): the fsdp strategy is claimed but that state is " \
           r"not sharded"


@pytest.mark.parametrize(("framework", "variant"), [("torch", "eager"), ("jax", "jit")])
def test_fsdp_claimed_over_replicated_parameters_fails_the_sharding_check(
        checked: Session, framework: str, variant: str) -> None:
    """The hook's adapter runs the replicated engine behind an fsdp id: every number is right,
    and only what each worker holds says the claim is false."""
    assert_caught(checked, case("fsdpwhole", framework, variant, 2, "fsdp"),
                  SHARDING.format(what="params"))


def test_fsdp_with_its_optimizer_state_whole_on_every_device_fails(checked: Session) -> None:
    """JAX: parameters sharded, Adam's slots placed whole on every device."""
    assert_caught(checked, case("fsdpstate", "jax", "jit", 2, "fsdp"),
                  SHARDING.format(what="optimizer state"))


@pytest.mark.parametrize(("name", "worker"), [
    ("fsdpstale", 1),  # rank 1 puts its shard back after each step: an all-gather of a stale one
    ("fsdpswap", 1),  # rank 1 holds rank 0's rows: the all-gather reads them twice
    ("fsdpnosync", r"\d"),  # every rank's reduce-scatter off: nothing steps
])
def test_a_shard_that_did_not_take_the_step_fails_its_audit_naming_the_worker(
        checked: Session, name: str, worker: object) -> None:
    """torch FSDP2, after the checks: the gathered parameters hold a shard that did not move
    as the reference's; the audit names the worker whose shard holds the worst element."""
    assert_caught(checked, case(name, "torch", "eager", 2, "fsdp"),
                  rf"{AUDIT}.*1 step\(s\) from the round's start, displacement of w1: .*"
                  rf"that element is in worker {worker}'s shard \(axis 0, ")


# -- no false alarm -------------------------------------------------------------------------------

HONEST = [case("honest", "numpy"), case("honest", "jax"), case("honest", "jax", "jit"),
          case("honest", "torch"), case("honest", "torch", "jit"), case("honest", "tensorflow"),
          case("honest", "tensorflow", "jit"), case("graph", "numpy"), case("dphonest", "torch"),
          case("dphonest", "jax", "jit"), case("dphonest", "torch", workers=2),
          case("dphonest", "jax", "jit", workers=2),
          *(case("dphonest", fw, variant, 2, strategy) for fw, variant in
            (("torch", "eager"), ("jax", "jit")) for strategy in ("fsdp", "tp")),
          # the single-device cases of the data-parallel cheaters' folders are honest
          case("dpshard", "torch"), case("dpshard", "jax", "jit"), case("dpdrift", "torch"),
          case("fsdpwhole", "torch"), case("fsdpwhole", "jax", "jit"),
          case("fsdpstate", "jax", "jit"), case("fsdpstale", "torch"),
          case("fsdpswap", "torch"), case("fsdpnosync", "torch")]


@pytest.mark.parametrize("name", HONEST)
def test_honest_implementations_pass_the_same_session(checked: Session, name: str) -> None:
    result = checked[name]
    assert result.status == "passed", f"{name}: {result.message}"


# -- what needs timing ----------------------------------------------------------------------------

def test_a_flop_count_beyond_the_measured_peak_fails_as_implausible(timed: Session) -> None:
    assert_caught(timed, case("overclaim", "numpy"),
                  r"physically implausible: [\d.]+ GFLOP/s achieved, but this machine's "
                  r"matrix-multiply peak for the dtype measured [\d.]+ GFLOP/s in this session")


def test_a_cheater_guessing_the_audited_rounds_from_its_call_count_is_caught_when_timed(
        timed: Session) -> None:
    """Honest in every round a --benchmark-disable session runs (and audits); timed sessions
    audit rounds drawn at random, seeded, which it cannot foresee."""
    assert_caught(timed, case("auditguess", "numpy"), AUDIT)


def test_answers_worked_out_in_a_turns_first_round_for_the_later_ones_fail_when_timed(
        timed: Session) -> None:
    """Work done ahead: keys come one round at a time, so the rounds that counted on answers
    worked out in the turn's first round (specs.AheadAnswers) return stale ones."""
    assert_caught(timed, case("aheadinfer", "numpy"),
                  rf"{AUDIT}.*forward pass of call \d+ \(probe \d+\): differs by")


def test_steps_finished_after_the_rounds_clock_fail_against_the_harness_work_there(
        timed: Session) -> None:
    """The round's copy of its results to the host is after the clock; an implementation that
    wraps it to do the round's steps there (tests/cheats/latecopy: honest results, in place)
    spends far longer after the clock than the copies and digests cost the parent."""
    assert_caught(timed, case("latecopy", "numpy"),
                  r"the worker spent [\d.e-]+ s of CPU after a median timed round's clock had "
                  r"stopped, where copying and digesting its results allows [\d.e-]+ s .*: "
                  r"work was moved after the clock")


def test_an_honest_timed_case_records_the_cores_its_rounds_used(timed: Session) -> None:
    """Every pass's clock keeps the most cores a round used over the case's threads
    (checking/cores.py): an honest round on its one core uses at most about one."""
    run_json = json.loads(Path(timed.folder / "run.json").read_text())
    (bench,) = [b for b in run_json["benchmarks"] if "honest-numpy" in b["name"]]
    record = bench["extra_info"]["mlbench"]
    ratios = [c["cores_ratio"] for c in record["checks"]["clocks"]]
    # as the check allows: the margin, and the reads' slack over the shortest round, a turn's
    # dropped one of a single step (a toy's step ~0.3 ms: a one-core round read 1.11 there)
    measure = record["measure"]
    step_s = min(min(p) for p in measure["passes"]) / measure["steps_per_call"]
    bound = 1 + cores.MARGIN + cores.SLACK_S / step_s
    assert len(ratios) == 2 and all(0 < r <= bound for r in ratios), (ratios, bound)


def test_the_audited_rounds_differ_between_passes_and_the_honest_case_passes_timed(
        timed: Session) -> None:
    assert timed[case("honest", "numpy")].status == "passed", timed.output[-2000:]
    run_json = json.loads(Path(timed.folder / "run.json").read_text())
    (bench,) = [b for b in run_json["benchmarks"] if "honest-numpy" in b["name"]]
    checks = bench["extra_info"]["mlbench"]["checks"]
    audited = checks["audited_rounds"]
    assert len(audited) == 2 and all(audited), audited  # every pass audited some rounds
    # drawn from a secret of each pass's own (with rounds of 10 ms a pass has a dozen rounds,
    # and two passes may draw the same one by chance: the secrets differ, and each pass's
    # audited rounds are the ones its secret draws)
    secrets = checks["audit_secrets"]
    assert len(set(secrets)) == 2, secrets
    clocks = checks["clocks"]
    for p, (secret, rounds) in enumerate(zip(secrets, audited, strict=True)):
        total = int(clocks[p]["rounds"])  # recorded and dropped: one dropped a turn
        kept = next(r for r in range(1, total + 1) if r + len(schedule.turns(r)) == total)
        drawn = schedule.audited_rounds(secret, case("honest", "numpy"), p,
                                        schedule.recorded_numbers(schedule.turns(kept), 1))
        assert set(rounds) <= drawn, (p, rounds, drawn)
