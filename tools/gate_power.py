"""How often the gates flag an unchanged case, and catch a slowed one, at a few processes a side:
simulated from a saved run's own rounds (issue 52), in seconds.

    python tools/gate_power.py                          # the committed baseline, 3 processes a side
    python tools/gate_power.py RUN.json --processes 5 --trials 4000 --alpha 0.01 --threshold 10%

RUN is a run saved with --mlbench-save: each case's timed rounds in each of its processes are
the host's measured spread. Every simulated session judges all the run's cases at once, as the
gates do, with the statistic the gates use (the A/B gate's paired t moderated by the session's
spread.Prior; the stored-baseline gate's Welch t with each figure's comparison group's spread,
spread.group_spreads, and spread.between_runs) and, beside it, the others: the unmoderated
tests the gates used before, and for the stored baseline a flat prior over the run's figures;
tests/unit/judging/test_gate_power.py checks these agree with the gates' own code.

**A/B** (``--mlbench-ab``): process i of the base ran beside process i of the head, their
turns back to back in each interleaving cycle, so a pair of processes shares its pass and the
host's moments; what it does not share is the part of each round that even two rounds run
back to back do not share. That part is measured from the run: the rounds of one turn run
back to back, and half the variance of the difference of two consecutive rounds of a turn,
over the variance of the rounds about their process's median, is its share (``Host.own``).
Each simulated pair of processes runs the recorded process's rounds in their recorded cycles
(``Measure.cycles``: one to three rounds a turn): each cycle has a moment both sides' rounds
in it share, each round a part of its own, both drawn from the case's recorded rounds (about
their process's median, so with the host's tails), scaled by those shares. The pair's log
ratio is the gate's (stats.paired_logs: the two sides' rounds matched by cycle, the
Hodges-Lehmann estimate over the cycles) and, beside it, the ratio of the two processes'
medians (the gate before). ``--process-sd`` gives each side's process an offset of its own
(a what-if: the committed baseline's rounds show none beyond what the cycles give, pooled
over its groups); the tried statistics that take each cycle pair as a unit assume there is
none. ``--max-time``, ``--min-rounds`` and ``--cycles`` lay each process's rounds out as the
code would under that plan (tools/gate_layout.py: schedule.rounds_per_process, turn_rounds
and turns, each case's round cost read from the run) in place of the cycles the run
recorded, and say what a pass's timed rounds cost then; the header also says where the run's
spread lives (per round, per turn, per process, and a process's own beyond its group's pass).

**Stored baseline** (``--mlbench-gate``): two runs on different days, nothing shared. A
case's process figure moves with its comparison group's pass (the host's moments while the
group's timed phase ran: every case of the group alike) and by its own; both spreads are
measured from the run (a group x pass layout of the log process medians). ``--between`` adds
a shift of each case's figure between the two days (not measured from one run: a what-if).

A slowdown injected into a case multiplies its head's figures; the tables give, for each
slowdown, the share of cases whose test says slower at ``--alpha`` (``p<alpha``) and whose
verdict is SLOWER (``p<alpha`` and a change beyond ``--threshold``: the gate fails), and the
range over the cases of the first.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "tools"))

import gate_layout  # noqa: E402
from pytest_mlbench import spread  # noqa: E402
from pytest_mlbench.storing import runs  # noqa: E402
from pytest_mlbench.storing.record import Record  # noqa: E402
from pytest_mlbench.storing.runs import Entry  # noqa: E402

BASELINE = ROOT / "baselines" / "amd-epyc-2c" / "0001_main.json"
SLOWDOWNS = (0.0, 0.05, 0.10, 0.20)


@dataclass(frozen=True)
class Host:
    """What a saved run says about its host's spread, case by case."""

    names: tuple[str, ...]
    groups: np.ndarray  # each case's comparison group, as an index
    rounds: tuple[tuple[np.ndarray, ...], ...]  # per case, per process: log rounds less median
    cycles: tuple[tuple[np.ndarray, ...], ...]  # per case, per process: each round's cycle
    own: float  # share of a round's spread that rounds run back to back do not share (sd)
    pass_sd: np.ndarray  # per group: sd of its pass effect on the log process medians
    case_sd: np.ndarray  # per case: sd of its process medians about its group's pass effects
    costs: tuple[gate_layout.Cost, ...]  # per case: what a round costs (--max-time etc.)
    plan: gate_layout.Plan  # the plan the run was recorded with
    parts: gate_layout.Parts  # where the cases' spread lives: round, turn, process
    own_parts: gate_layout.Parts  # every case's, less its group's pass effects (the host's)

    @classmethod
    def load(cls, path: Path) -> Host:
        run = runs.load_run(path)
        cases = [(e, r) for e, r in run.cases if r.measure is not None
                 and sum(1 for p in r.measure.passes if p) >= 2]
        measures = [r.measure for _, r in cases if r.measure is not None]
        logs = [[np.log(np.asarray(p)) for p in m.per_step() if p] for m in measures]
        labels = sorted({r.identity.group for _, r in cases})
        groups = np.array([labels.index(r.identity.group) for _, r in cases])
        pass_sd, case_sd = _layout([np.array([np.median(p) for p in x]) for x in logs], groups)
        cycles = tuple(_cycles_of(r, x) for (_, r), x in zip(cases, logs, strict=True))
        plan = gate_layout.recorded_plan(path, max(len(x) for x in logs))
        return cls(tuple(r.name for _, r in cases), groups,
                   tuple(tuple(p - np.median(p) for p in x) for x in logs), cycles,
                   _own_share(cases, logs), pass_sd, case_sd,
                   tuple(gate_layout.cost_of(m, plan) for m in measures), plan,
                   gate_layout.spread_parts(logs, cycles, split_only=True),
                   gate_layout.spread_parts(gate_layout.less_pass_effects(logs, groups), cycles))

    def laid_out(self, plan: gate_layout.Plan) -> tuple[tuple[np.ndarray, ...], ...]:
        """Each case's rounds' cycles in every process under ``plan`` (gate_layout.labels),
        in place of those the run recorded."""
        return tuple((gate_layout.labels(cost, plan),) for cost in self.costs)


def _cycles_of(record: Record, logs: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    """Each recorded process's rounds' cycles (Measure.cycles); one cycle a round where the
    run did not record them."""
    found = record.measure.cycles if record.measure is not None else ()
    return tuple(np.asarray(found[i]) if i < len(found) and len(found[i]) == len(x)
                 else np.arange(len(x)) for i, x in enumerate(logs))


def _own_share(cases: Sequence[tuple[Entry, Record]], logs: list[list[np.ndarray]]) -> float:
    """sd of what two back-to-back rounds of one turn do not share, over the rounds' sd about
    their process's median, pooled over the run (``Measure.cycles`` says which rounds shared
    a turn)."""
    steps: list[float] = []
    about: list[np.ndarray] = []
    for (_, record), process_logs in zip(cases, logs, strict=True):
        cycles_of = record.measure.cycles if record.measure is not None else ()
        for x, cycles in zip(process_logs, cycles_of, strict=False):  # none when not recorded
            steps += [float(x[j + 1] - x[j]) for j in range(len(x) - 1)
                      if cycles[j] == cycles[j + 1]]
            about.append(x - np.median(x))
    if len(steps) < 10:
        raise SystemExit("the run has too few turns of two rounds or more to measure what "
                         "back-to-back rounds share (ten are needed)")
    return float(np.sqrt(np.mean(np.square(steps)) / 2) / np.std(np.concatenate(about)))


def _layout(medians: list[np.ndarray], groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group, the sd of its pass effect; per case, the sd of its log process medians about
    its group's pass effects (a two-way layout, case x pass, within each group; a group of
    one case, or of cases with unequal pass counts, puts it all in the case's own)."""
    pass_sd = np.zeros(groups.max() + 1)
    case_sd = np.array([float(np.std(m, ddof=1)) for m in medians])
    for g in range(len(pass_sd)):
        members = [m for m, gi in zip(medians, groups, strict=True) if gi == g]
        if len(members) < 2 or len({len(m) for m in members}) > 1:
            continue
        x = np.array(members)
        x = x - x.mean(axis=1, keepdims=True)
        effect = x.mean(axis=0)
        rest = x - effect
        k, n = x.shape
        resid = (rest**2).sum(axis=1) / (n - 1) * k / (k - 1)  # unbiased per case
        pass_sd[g] = math.sqrt(max(float(effect.var(ddof=1)) - float(resid.mean()) / k, 0.0))
        case_sd[groups == g] = np.sqrt(resid)
    return pass_sd, case_sd


# -- A/B -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ABLogs:
    """Simulated A/B sessions of unchanged code, (trials, cases, processes) each: a process
    pair's log ratio head / base as the gate reads it (``cycle``: stats.paired_logs, the two
    sides' rounds matched by cycle), as it read it before (``process``: the ratio of the two
    processes' medians); and per (trials, cases) the variance of a pair's cycle logs about
    their mean, pooled over its pairs, with its df and its cycles a pair (the what-ifs)."""

    process: np.ndarray
    cycle: np.ndarray
    within: np.ndarray
    within_df: np.ndarray
    cycles: np.ndarray


def ab_logs(host: Host, rng: np.random.Generator, trials: int, processes: int,
            process_sd: float = 0.0,
            layout: Sequence[Sequence[np.ndarray]] | None = None) -> ABLogs:
    """Each simulated pair of processes runs the recorded process's rounds in its cycles
    (Measure.cycles: a turn of one to three rounds a cycle, the two sides' turns of a cycle
    back to back), or those ``layout`` gives (Host.laid_out: another plan's). A cycle's
    moment is shared by both sides' rounds in it; each round adds its own part;
    ``process_sd`` (a what-if) gives each side's process an offset of its own."""
    shape = (trials, len(host.names), processes)
    process, cycle, within = np.empty(shape), np.empty(shape), np.zeros(shape[:2])
    counts = np.zeros(shape[:2]), np.zeros(len(host.names))
    moment, own = math.sqrt(1 - host.own**2), host.own
    layout = host.cycles if layout is None else layout
    for c, recorded in enumerate(host.rounds):
        pool = np.concatenate(recorded)
        for i in range(processes):
            labels = layout[c][i % len(layout[c])]
            ids = np.unique(labels)
            shared = (moment * rng.choice(pool, (trials, len(ids))))[:, np.searchsorted(
                ids, labels)]
            base, head = (shared + own * rng.choice(pool, (trials, len(labels)))
                          + process_sd * rng.standard_normal((trials, 1)) for _ in range(2))
            process[:, c, i], cycle[:, c, i], ss = pair_logs(base, head, labels)
            within[:, c] += ss
            counts[0][:, c] += len(ids) - 1
            counts[1][c] += len(ids) / processes
    return ABLogs(process, cycle, within / counts[0], counts[0], counts[1])


def pair_logs(base: np.ndarray, head: np.ndarray,
              labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One process pair's log rounds (trials, rounds) a side, each round's cycle ``labels``:
    the log ratio of the two processes' medians, stats.paired_logs's by cycle, and the sum of
    squares of the cycle logs about their mean (trials each)."""
    def median(x: np.ndarray) -> np.ndarray:  # of the seconds, as stats takes it
        return np.log(np.median(np.exp(x), axis=1))

    ids = np.unique(labels)
    logs = np.stack([median(head[:, labels == k]) - median(base[:, labels == k])
                     for k in ids], axis=1)
    return (median(head) - median(base), hodges_lehmann(logs),
            ((logs - logs.mean(axis=1, keepdims=True)) ** 2).sum(axis=1))


def hodges_lehmann(logs: np.ndarray) -> np.ndarray:
    """stats.cycle_log along the last axis: the median of the pairwise means."""
    i, j = np.triu_indices(logs.shape[-1])
    return np.median((logs[..., i] + logs[..., j]) / 2, axis=-1)


@dataclass(frozen=True)
class Verdicts:
    """Per trial and case: p(slower) and whether the gate's verdict is SLOWER."""

    p_slower: np.ndarray
    slower: np.ndarray


def run_priors(variances: np.ndarray, df: float) -> list[spread.Prior | None]:
    """Each simulated run's prior (spread.Prior.fit over its cases' sample variances)."""
    return [spread.Prior.fit([(float(v), int(df)) for v in row]) for row in variances]


def moderate(variances: np.ndarray, df: float,
             priors: Sequence[spread.Prior | None]) -> tuple[np.ndarray, np.ndarray]:
    """Prior.moderate for every case of every trial (row i takes ``priors[i]``)."""
    s2 = np.array([[p.s2 if p else np.nan, p.df if p else np.nan] for p in priors])
    d0, s0 = s2[:, 1:2], s2[:, 0:1]
    have = np.array([p is not None for p in priors])[:, None]
    inf = np.isinf(d0)
    with np.errstate(invalid="ignore"):  # rows without a prior, and inf / inf, not taken
        var = np.where(have, np.where(inf, s0, (d0 * s0 + df * variances) / (d0 + df)),
                       variances)
    dfs = np.where(have, np.where(inf, np.inf, d0 + df), df)
    return var, np.broadcast_to(dfs, variances.shape)


def ab_variances(logs: np.ndarray, moderated: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Each case's variance of its paired logs and its df (trials, cases): moderated by its
    session's prior (the gate's, stats.paired_ratio with ab.session_prior), or its own."""
    n = logs.shape[2]
    var = logs.var(axis=2, ddof=1)
    if not moderated:
        return var, np.full(var.shape, n - 1.0)
    return moderate(var, n - 1, run_priors(var, n - 1))


def block_variances(ab: ABLogs, how: str) -> tuple[np.ndarray, np.ndarray]:
    """Tried: a pair's variance from its cycles' spread, ``w`` (the pooled within-pair
    variance of the cycle logs over the cycles a pair, on the within df). ``units``: each
    cycle pair a unit, the process pair a block: ``w`` itself, which holds only while the
    two sides' processes add nothing of their own. ``factor``: times the session's ratio of
    the pairs' variance to ``w`` (the share of the pairs' spread the cycles do not see, and
    the estimator's efficiency), one factor for the session. ``trend``: each case's pairs'
    own variance over its ``w``, moderated by a prior fitted on those ratios over the session
    (limma-trend's idea, the cycles' spread as the covariate), times ``w``."""
    w = ab.within / ab.cycles
    if how == "units":
        return w, ab.within_df
    own = ab.cycle.var(axis=2, ddof=1)
    if how == "factor":
        return w * (own.sum(axis=1) / w.sum(axis=1))[:, None], ab.within_df
    n = ab.cycle.shape[2]
    ratio, dfs = moderate(own / w, n - 1, run_priors(own / w, n - 1))
    return ratio * w, dfs


def ab_verdicts(logs: np.ndarray, variances: tuple[np.ndarray, np.ndarray], slowdown: float,
                *, alpha: float, threshold: float) -> Verdicts:
    """The A/B gate on every case of every trial, each case's head ``slowdown`` slower
    (stats.paired_ratio: a t-test on the mean log ratio, the figure the median pair). A
    session's prior depends on its cases' variances only, which a slowdown does not move, so
    every case can be the slowed one of its trial at once."""
    n = logs.shape[2]
    shifted = logs + math.log1p(slowdown)
    var, dfs = variances
    diff, se = shifted.mean(axis=2), np.sqrt(var / n)
    with np.errstate(divide="ignore", invalid="ignore"):  # pairs that agreed exactly: as
        t = np.where(se > 0, diff / se, np.where(diff > 0, np.inf, -np.inf))  # stats does
    p = scipy_stats.t.sf(t, dfs)
    return Verdicts(p, (p < alpha) & (np.median(shifted, axis=2) > math.log1p(threshold)))


# -- stored baseline --------------------------------------------------------------------------

def stored_logs(host: Host, rng: np.random.Generator, trials: int, processes: int,
                between: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Two independent runs' log process medians, (trials, cases, processes) each, of
    unchanged code; ``between``: the sd of each case's shift from one day to the other."""
    def one() -> np.ndarray:
        passes = rng.standard_normal((trials, len(host.pass_sd), processes))
        own = rng.standard_normal((trials, len(host.names), processes))
        return (passes * host.pass_sd[None, :, None])[:, host.groups] + own * host.case_sd[
            None, :, None]
    shift = between * rng.standard_normal((trials, len(host.names), 1))
    return one(), one() + shift


def group_parts(logs: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, ...]:
    """spread.group_spreads for every case of every trial: per case, the variance of one
    process as its shared part, its df, its own part and its df ((trials, cases) each)."""
    n = logs.shape[2]
    dev = logs - logs.mean(axis=2, keepdims=True)
    k = np.bincount(groups)[groups].astype(np.float64)
    effect = np.stack([dev[:, groups == g].mean(axis=1) for g in range(groups.max() + 1)],
                      axis=1)[:, groups]
    shared = effect.var(axis=2, ddof=1)
    own = ((dev - effect) ** 2).sum(axis=2) / (n - 1) * k / np.maximum(k - 1, 1)
    alone = k < 2  # a group of one: the case's own variance
    own = np.where(alone, logs.var(axis=2, ddof=1), own * (1 - 1 / k))
    shared = np.where(alone, 0.0, shared)
    own_df = np.where(alone, n - 1.0, (n - 1) * (k - 1) / np.maximum(k, 1))
    return shared, np.full(shared.shape, n - 1.0), own, np.broadcast_to(own_df, shared.shape)


STORED = ("group spread + between runs (the gate)", "run prior + between runs",
          "plain Welch t")


def stored_variances(base: np.ndarray, cur: np.ndarray, groups: np.ndarray,
                     how: str = STORED[0], between: bool = True) -> Stored:
    """The stored-baseline gate's difference of the mean log process medians of every case
    of every trial, its variance and df (stats.ratio): each side's variance as ``how`` says,
    its comparison group's (spread.group_spreads, the gate's), the run's prior's, or its own;
    with spread.between_runs' variance unless ``between`` is False or the test is the plain
    one (which had none)."""
    n = base.shape[2]
    parts = []
    for logs in (base, cur):
        if how == STORED[0]:
            shared, shared_df, own, own_df = group_parts(logs, groups)
            parts += [(shared / n, shared_df), (own / n, own_df)]
            continue
        var = logs.var(axis=2, ddof=1)
        dfs: np.ndarray = np.full(var.shape, n - 1.0)
        if how == STORED[1]:
            var, dfs = moderate(var, n - 1, run_priors(var, n - 1))
        parts.append((var / n, dfs))
    within = sum(v for v, _ in parts)
    within_df = within**2 / sum(v**2 / d for v, d in parts)
    diff = cur.mean(axis=2) - base.mean(axis=2)
    tau = np.zeros((len(diff), 1))
    tau_df = np.full((len(diff), 1), np.inf)
    if between and how != STORED[2]:
        for t in range(len(diff)):
            tau[t], tau_df[t] = spread.between_runs(diff[t], within[t], within_df[t],
                                                    len(set(groups.tolist())))
    var = within + tau
    return Stored(diff, var, var**2 / (within**2 / within_df + tau**2 / tau_df))


@dataclass(frozen=True)
class Stored:
    diff: np.ndarray  # log current / baseline, (trials, cases)
    var: np.ndarray
    df: np.ndarray


def stored_verdicts(found: Stored, slowdown: float, *, alpha: float,
                    threshold: float) -> Verdicts:
    """Every case of every trial ``slowdown`` slower. The between-run variance was estimated
    on the unchanged runs: one slowed case among many moves its robust scale by next to
    nothing."""
    shifted = found.diff + math.log1p(slowdown)
    p = scipy_stats.t.sf(shifted / np.sqrt(found.var), np.maximum(found.df, 1.0))
    return Verdicts(p, (p < alpha) & (shifted > math.log1p(threshold)))


# -- the table --------------------------------------------------------------------------------

def rates(found: Verdicts, alpha: float) -> str:
    per_case = (found.p_slower < alpha).mean(axis=0)
    return (f"{per_case.mean():.1%} / {found.slower.mean():.1%} "
            f"({per_case.min():.0%}-{per_case.max():.0%})")


def table(title: str, judge: Mapping[str, Sequence[Verdicts]], alpha: float) -> list[str]:
    lines = [f"**{title}**: share of cases with p<alpha / SLOWER (range of p<alpha over "
             "the cases)", "", "| statistic | " + " | ".join(
                 "unchanged" if s == 0 else f"{s:.0%} slower" for s in SLOWDOWNS) + " |",
             "|---" * (len(SLOWDOWNS) + 1) + "|"]
    for name, verdicts in judge.items():
        lines.append(f"| {name} | " + " | ".join(rates(v, alpha) for v in verdicts) + " |")
    return lines + [""]


def _pair_sd(logs: np.ndarray) -> float:
    return float(np.sqrt(np.median(logs.var(axis=2, ddof=1))))


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("run", nargs="?", type=Path, default=BASELINE)
    cli.add_argument("--processes", type=int, default=3)
    cli.add_argument("--trials", type=int, default=2000)
    cli.add_argument("--alpha", type=float, default=0.01)
    cli.add_argument("--threshold", default="10%")
    cli.add_argument("--between", type=float, default=0.0,
                     help="sd of each case's day-to-day shift in the stored-baseline gate")
    cli.add_argument("--seed", type=int, default=52)
    cli.add_argument("--process-sd", type=float, default=0.0,
                     help="A/B what-if: sd of an offset of each side's process of its own")
    cli.add_argument("--ab-only", action="store_true", help="the A/B gate's table alone")
    cli.add_argument("--max-time", type=float, help="A/B: lay the rounds out as the code "
                     "would at this --benchmark-max-time (the run's otherwise)")
    cli.add_argument("--min-rounds", type=int, help="A/B: ... at this --benchmark-min-rounds")
    cli.add_argument("--cycles", type=int, help="A/B: ... with this many cycles a pass")
    args = cli.parse_args()
    if not args.threshold.endswith("%"):
        cli.error("--threshold takes a percentage with %, e.g. 10%")
    threshold = float(args.threshold[:-1]) / 100
    host = Host.load(args.run)
    rng = np.random.default_rng(args.seed)
    if (args.max_time is not None and args.max_time <= 0) or (args.cycles or 1) < 1:
        cli.error("--max-time takes seconds above 0 and --cycles a count of 1 or more")
    plan = gate_layout.asked(host.plan, args.processes, args.max_time, args.min_rounds,
                             args.cycles)
    found = ab_logs(host, rng, args.trials, args.processes, args.process_sd,
                    None if plan is None else host.laid_out(plan))
    kw = {"alpha": args.alpha, "threshold": threshold}
    print(f"`python tools/gate_power.py {args.run} --processes {args.processes} --trials "
          f"{args.trials} --alpha {args.alpha} --threshold {args.threshold} --between "
          f"{args.between} --seed {args.seed} --process-sd {args.process_sd}"
          + "".join(f" --{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                    if k in ("max_time", "min_rounds", "cycles") and v is not None) + "`: "
          f"{len(host.names)} cases; back-to-back rounds do not share {host.own:.2f} of a "
          f"round's sd; a pair's sd (median case) {_pair_sd(found.cycle):.1%} by cycle, "
          f"{_pair_sd(found.process):.1%} from process medians; "
          f"{gate_layout.parts_line(host.parts, host.own_parts)}")
    print(gate_layout.layout_line(host.costs, host.plan, plan, args.processes) + "\n")
    ab = {name: [ab_verdicts(logs, variances, s, **kw) for s in SLOWDOWNS]
          for name, logs, variances in (
              ("by cycle, moderated (the gate)", found.cycle, ab_variances(found.cycle)),
              ("by cycle, plain paired t", found.cycle, ab_variances(found.cycle, False)),
              ("process medians, moderated (before)", found.process,
               ab_variances(found.process)),
              ("process medians, plain paired t", found.process,
               ab_variances(found.process, False)),
              ("by cycle, cycles as units in process blocks (tried)", found.cycle,
               block_variances(found, "units")),
              ("by cycle, units times the session's factor (tried)", found.cycle,
               block_variances(found, "factor")),
              ("by cycle, moderated on the cycles' spread (tried)", found.cycle,
               block_variances(found, "trend")))}
    print("\n".join(table(f"A/B, {args.processes} processes a side", ab, args.alpha)))
    if args.ab_only:
        return 0
    base, cur = stored_logs(host, rng, args.trials, args.processes, args.between)
    stored = {how: [stored_verdicts(found, s, **kw) for s in SLOWDOWNS]
              for how, found in ((h, stored_variances(base, cur, host.groups, h))
                                 for h in STORED)}
    print("\n".join(table(f"Stored baseline, {args.processes} processes a side", stored,
                          args.alpha)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
