"""The same-machine A/B gate: this revision against a base revision in one job, interleaved.

``--mlbench-ab=REF`` measures every selected case twice per process pass: once with the code
of REF (a git revision, checked out into a temporary worktree) and once with this tree's, their
workers alive side by side and their timed turns alternating (measuring/campaign.py). Process i of the
base ran beside process i of the head, so each case gets paired samples, and slow periods of a
shared runner fall on both alike. A case is SLOWER when a paired t-test on the log ratios of
its processes (stats.paired_ratio; each pair's from the two sides' rounds of the same cycles,
which ran back to back: stats.paired_logs), its variance moderated by what the session's other cases
say about spread (``session_prior``: limma's moderated t, so three processes a side are
judged with the session's degrees of freedom), puts it slower with p below
--mlbench-gate-alpha and by more than --mlbench-gate-threshold;
any SLOWER case fails the session, as a failed report pytest counts (judging/verdict.py: the
session's last line reads ``1 failed``). ``--mlbench-ab=python:/path/to/python`` compares this tree
run by another environment's interpreter (a framework upgrade, say) instead of another
revision.

Stored baselines remain what they are good for: history and comparing machines (gate.py's
successor, judging/sessions.py). Across machines or days a run-to-run shift of a few tens of
per cent is ordinary on a shared runner; within one job, interleaved, it cancels.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_mlbench import owned, stats
from pytest_mlbench.engine import leftovers
from pytest_mlbench.engine.pools import Side
from pytest_mlbench.judging import regression, verdict
from pytest_mlbench.measuring.outcome import Outcome
from pytest_mlbench.options import GateSettings, OptionError, parse_percent
from pytest_mlbench.storing.record import Measure

BASE = "base"
NOTHING_RAN = "nothing judged: no mlbench case ran"


class ABError(Exception):
    """The base side cannot be set up; the message says why and what to do."""


@dataclass
class BaseSide:
    side: Side
    label: str  # what the table calls the base: the revision or the interpreter
    cleanup: Any = None

    def close(self) -> None:
        if self.cleanup is not None:
            self.cleanup()
            self.cleanup = None


def prepare(rootpath: Path, suites: Path, spec: str) -> BaseSide:
    """The base side for ``spec``: ``python:<interpreter>`` or a git revision."""
    if spec.startswith("python:"):
        python = spec[len("python:"):]
        if not Path(python).is_file():
            raise ABError(f"--mlbench-ab: {python} is not a file; give the interpreter of the "
                          "environment to compare against, e.g. python:/opt/venv-old/bin/python")
        return BaseSide(Side(BASE, python, (str(rootpath),), str(suites)), python)
    return _worktree(rootpath, suites, spec)


def _git(rootpath: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(rootpath), *args], capture_output=True, text=True,
                          check=False)


def _worktree(rootpath: Path, suites: Path, ref: str) -> BaseSide:
    if shutil.which("git") is None:
        raise ABError("--mlbench-ab: git is not installed; a revision needs git")
    top = _git(rootpath, "rev-parse", "--show-toplevel")
    if top.returncode:
        raise ABError(f"--mlbench-ab: {rootpath} is not in a git repository")
    sha = _git(rootpath, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if sha.returncode:
        raise ABError(f"--mlbench-ab: git does not know the revision {ref!r} here; fetch it "
                      f"first (git fetch origin {ref.split('/')[-1]})")
    # the worktree goes into a folder of its own inside a marked one (git will not add it to
    # a folder that holds anything, the mark included): removed only while that mark is there
    folder = Path(leftovers.temp_folder("mlbench-ab-"))
    tree = folder / "tree"
    added = _git(rootpath, "worktree", "add", "--detach", str(tree), sha.stdout.strip())
    if added.returncode:
        owned.discard(folder)
        raise ABError(f"--mlbench-ab: git worktree add failed: {added.stderr.strip()}")

    def remove() -> None:
        _git(rootpath, "worktree", "remove", "--force", str(tree))
        owned.discard(folder)

    leftovers.worktree(rootpath, tree, remove)  # removed even if the session is killed
    here = Path(top.stdout.strip())
    base_root = tree / rootpath.resolve().relative_to(here.resolve())
    base_suites = base_root / suites.resolve().relative_to(rootpath.resolve())
    return BaseSide(Side(BASE, "", (str(base_root),), str(base_suites)),
                    f"{ref} ({sha.stdout.strip()[:10]})", remove)


# -- judging ---------------------------------------------------------------------------------

def paired(name: str, base: Outcome | None, head: Outcome,
           threshold: float) -> tuple[Measure, Measure] | regression.Row:
    """Both sides' measures when the case can be judged (paired samples, like with like),
    else its row saying why not."""
    if base is None:
        return regression.Row(name, "not in the base revision (not judged)", threshold)
    if base.status != "passed" or base.record is None or base.record.measure is None:
        return regression.Row(name, f"base {base.status}: {base.message.splitlines()[0]}"
                              if base.message else f"base {base.status}", threshold)
    if head.record is None or head.record.measure is None:
        return regression.Row(name, f"head {head.status} (not judged)", threshold)
    b, h = base.record.measure, head.record.measure
    if base.record.identity.key != head.record.identity.key:
        diffs = "; ".join(base.record.identity.differences(head.record.identity))
        return regression.Row(name, f"not comparable: {diffs}", threshold, b.estimate(),
                              h.estimate())
    if len(b.passes) != len(h.passes) or len(h.passes) < regression.MIN_PROCESSES:
        return regression.Row(name, f"inconclusive ({len(b.passes)} base and {len(h.passes)} "
                              "head processes; pairs of at least 2 needed)", threshold,
                              b.estimate(), h.estimate())
    return b, h


def compare(name: str, base: Outcome | None, head: Outcome, *, threshold: float,
            alpha: float, prior: stats.Prior | None = None) -> regression.Row:
    """One case, paired over processes, its variance moderated by the session's ``prior``
    (``session_prior``)."""
    found = paired(name, base, head, threshold)
    if isinstance(found, regression.Row):
        return found
    b, h = found
    ratio = stats.paired_ratio(b.per_step(), h.per_step(), cycles=(b.cycles, h.cycles),
                               prior=prior)
    return regression.Row(name, regression.verdict(ratio, threshold, alpha), threshold,
                          b.estimate(), h.estimate(), ratio)


Pairs = Mapping[str, tuple[Outcome | None, Outcome]]


def session_prior(pairs: Pairs) -> stats.Prior | None:
    """The session's prior on the spread of its cases' paired log ratios (stats.Prior), over
    every case that can be judged: with it, three processes a side are judged with the
    degrees of freedom of the whole session (None below stats.PRIOR_MIN such cases)."""
    found = (paired(name, base, head, 0.0) for name, (base, head) in pairs.items())
    return stats.Prior.of_logs(
        stats.paired_logs(b.per_step(), h.per_step(), (b.cycles, h.cycles))
        for b, h in (f for f in found if isinstance(f, tuple)))


@dataclass
class ABSession:
    """Registered by plugin.py when --mlbench-ab is given: judges at session finish."""

    config: pytest.Config
    label: str
    gate: GateSettings
    thresholds: dict[str, float] = field(default_factory=dict)
    judgement: regression.Judgement | None = None

    def judge(self, pairs: Pairs) -> None:
        prior = session_prior(pairs)
        rows = [compare(name, base, head, threshold=self.thresholds.get(name,
                                                                        self.gate.threshold),
                        alpha=self.gate.alpha, prior=prior)
                for name, (base, head) in pairs.items()]
        self.judgement = regression.Judgement(tuple(rows))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Per-case thresholds: @pytest.mark.mlbench_gate(threshold="25%")."""
        for item in items:
            marker = item.get_closest_marker("mlbench_gate")
            case = getattr(getattr(item, "callspec", None), "params", {}).get("mlbench_case")
            if marker is None or case is None or not hasattr(case, "name"):
                continue
            value = marker.kwargs.get("threshold", marker.args[0] if marker.args else None)
            try:
                self.thresholds[case.name] = parse_percent(str(value))
            except OptionError as exc:
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.mlbench_gate: {exc}") \
                    from None

    @pytest.hookimpl(tryfirst=True)  # its verdict's report before --junitxml writes its file
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        failure = (regression.failed_line(self.judgement) if self.judgement is not None
                   else NOTHING_RAN)
        if failure is not None and session.exitstatus == 0:  # nothing judged is never a pass
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        verdict.report(session, verdict.AB, failure)

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: Any) -> tuple[str, str, str] | None:
        return verdict.status(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_benchmark_update_json(self, config: pytest.Config, benchmarks: Any,
                                     output_json: dict[str, Any]) -> None:
        """The verdicts go into --benchmark-json too, for scripts (tools/calibrate_gate.py)."""
        rows = self.judgement.rows if self.judgement else ()
        output_json["mlbench_ab"] = [
            {"name": r.name, "verdict": r.verdict, "threshold": r.threshold,
             "change": r.ratio.change if r.ratio else None,
             "interval": [r.ratio.low - 1, r.ratio.high - 1] if r.ratio else None,
             "p_slower": r.ratio.p_slower if r.ratio else None} for r in rows]

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        tr.section(f"mlbench A/B against {self.label} (paired, per step)")
        if self.judgement is None:
            tr.write_line(f"mlbench A/B: {NOTHING_RAN}", red=True)
            return
        for line in regression.table(self.judgement.rows):
            tr.write_line(line)
        failed = regression.fails(self.judgement)
        tr.write_line(regression.summary(self.judgement).replace("mlbench gate", "mlbench A/B"),
                      red=failed, green=not failed)


def register(config: pytest.Config, spec: str, gate: GateSettings, suites: Path,
             ) -> tuple[ABSession, BaseSide]:
    """Called by plugin.py for --mlbench-ab: refused before the run (one line) when timing is
    off or the base cannot be set up."""
    from pytest_mlbench.judging.sessions import conflict

    why = conflict(config)
    if why is not None:
        raise pytest.UsageError(f"--mlbench-ab: refused: {why}")
    try:
        base = prepare(config.rootpath, suites, spec)
    except ABError as exc:
        raise pytest.UsageError(str(exc)) from None
    session = ABSession(config, base.label, gate)
    config.pluginmanager.register(session, "mlbench-ab")
    return session, base

