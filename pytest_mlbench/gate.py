"""The regression gate: each benchmark's rounds against a baseline's rounds.

A benchmark fails only when it is both significantly slower (one-sided Mann-Whitney U on the
raw rounds, so no normality is assumed and outlier rounds weigh little) and slower in median by
more than a threshold (a minimum effect size, so a tiny but consistent shift on a big sample
does not fail an honest pull request). Rounds are divided by ``extra_info["steps_per_call"]``
so medians read as seconds per training step.

``GateSession`` and ``SaveSession`` are registered by plugin.py in ``pytest_configure``, the way
pytest-benchmark registers its BenchmarkSession; they read pytest-benchmark's benchmarks at
session finish and write their report in the terminal summary."""

from __future__ import annotations

import dataclasses
import math
import platform
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_mlbench import fingerprint, machine
from pytest_mlbench.baseline import BaselineError, BaselineStorage, load_run
from pytest_mlbench.options import GateSettings, OptionError, parse_percent

MARKER = ("mlbench_gate(threshold): per-benchmark gate threshold, a percentage such as '25%' "
          "(default: --mlbench-gate-threshold)")
FAILED = "SLOWER"
CONTROL_SLOWER = "machine slower (control benchmark; not a failure)"


@dataclass(frozen=True)
class Comparison:
    """One benchmark against its baseline, per training step."""

    name: str
    baseline_median: float
    current_median: float
    change: float  # fraction: +0.2 is 20% slower
    p_value: float  # one-sided: current slower than baseline
    threshold: float
    verdict: str

    @property
    def failed(self) -> bool:
        return self.verdict == FAILED


def per_step(bench: Mapping[str, Any]) -> list[float]:
    """Raw round times of one benchmark dict, in seconds per training step."""
    steps = int(bench.get("extra_info", {}).get("steps_per_call", 1) or 1)
    return [t / steps for t in bench["stats"].get("data", [])]


def smallest_p(n: int, m: int) -> float:
    """The smallest one-sided p-value an exact Mann-Whitney test can give for n and m rounds."""
    return 1 / math.comb(n + m, n)


def compare_rounds(name: str, baseline: Sequence[float], current: Sequence[float], *,
                   threshold: float, alpha: float) -> Comparison:
    from scipy.stats import mannwhitneyu

    base_med, cur_med = statistics.median(baseline), statistics.median(current)
    change = cur_med / base_med - 1
    p_slower = float(mannwhitneyu(current, baseline, alternative="greater").pvalue)
    p_faster = float(mannwhitneyu(current, baseline, alternative="less").pvalue)
    if smallest_p(len(baseline), len(current)) > alpha:
        verdict = f"inconclusive ({len(baseline)}+{len(current)} rounds)"
    elif p_slower < alpha and change > threshold:
        verdict = FAILED
    elif p_slower < alpha:
        verdict = "slower, within threshold"
    elif p_faster < alpha and change < -threshold:
        verdict = "faster"
    else:
        verdict = "no significant change"
    return Comparison(name, base_med, cur_med, change, p_slower, threshold, verdict)


def compare_runs(baseline: Mapping[str, Any], current: Mapping[str, Any], *, threshold: float,
                 alpha: float, thresholds: Mapping[str, float] | None = None) -> list[Comparison]:
    """Every current benchmark with raw rounds that the baseline also has, matched by fullname."""
    base = {b["fullname"]: b for b in baseline["benchmarks"]}
    out = []
    for bench in current["benchmarks"]:
        old = base.get(bench["fullname"])
        if old is None or len(per_step(old)) < 2 or len(per_step(bench)) < 2:
            continue
        limit = (thresholds or {}).get(bench["fullname"], threshold)
        found = compare_rounds(bench["name"], per_step(old), per_step(bench), threshold=limit,
                               alpha=alpha)
        if found.failed and bench.get("extra_info", {}).get("control"):
            # the control measures the machine, not the code: report it, never fail on it
            found = dataclasses.replace(found, verdict=CONTROL_SLOWER)
        out.append(found)
    return out


def unmatched(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Current benchmarks the gate could not judge: not in the baseline or without raw rounds."""
    base = {b["fullname"]: b for b in baseline["benchmarks"]}
    return [b["name"] for b in current["benchmarks"]
            if b["fullname"] not in base or len(per_step(base[b["fullname"]])) < 2]


def table(comparisons: Sequence[Comparison]) -> list[str]:
    width = max([len(c.name) for c in comparisons] + [9])
    lines = [f"{'benchmark':<{width}} {'baseline (ms)':>13} {'current (ms)':>12} "
             f"{'change':>8} {'limit':>6} {'p-value':>9}  verdict"]
    for c in comparisons:
        lines.append(f"{c.name:<{width}} {c.baseline_median * 1e3:>13.4f} "
                     f"{c.current_median * 1e3:>12.4f} {c.change:>+8.1%} {c.threshold:>6.0%} "
                     f"{c.p_value:>9.2g}  {c.verdict}")
    return lines


def summary(comparisons: Sequence[Comparison]) -> str:
    failed = [c for c in comparisons if c.failed]
    if not failed:
        return f"mlbench gate: passed ({len(comparisons)} benchmarks, none significantly slower)"
    return (f"mlbench gate: FAILED: {len(failed)} of {len(comparisons)} benchmarks slower: "
            + ", ".join(f"{c.name} {c.change:+.1%} (p={c.p_value:.2g})" for c in failed))


# -- pytest session objects -------------------------------------------------------------------

def current_machine_info() -> dict[str, Any]:
    """The stable part of this machine's machine_info, without pytest-benchmark's slow cpuinfo."""
    return {"mlbench": machine.machine_info(), "python_version": platform.python_version()}


def storage(settings: GateSettings, rootpath: Path) -> BaselineStorage:
    root = Path(settings.baselines)
    root = root if root.is_absolute() else rootpath / root
    return BaselineStorage(root, fingerprint.machine_id(current_machine_info()))


def session_json(config: pytest.Config) -> dict[str, Any] | None:
    """This session's run as pytest-benchmark's JSON, raw rounds included, via its own hooks."""
    bs = config._benchmarksession  # type: ignore[attr-defined]
    if not bs.benchmarks:
        return None
    machine_info = bs.get_machine_info()
    commit_info = config.hook.pytest_benchmark_generate_commit_info(config=config)
    config.hook.pytest_benchmark_update_commit_info(config=config, commit_info=commit_info)
    output = config.hook.pytest_benchmark_generate_json(
        config=config, benchmarks=bs.benchmarks, include_data=True, machine_info=machine_info,
        commit_info=commit_info)
    config.hook.pytest_benchmark_update_json(config=config, benchmarks=bs.benchmarks,
                                             output_json=output)
    return dict(output)


class SaveSession:
    """``--mlbench-save``: refuse a clobbering save before any benchmark runs, save at the end."""

    def __init__(self, config: pytest.Config, settings: GateSettings) -> None:
        self.config, self.settings = config, settings
        self.storage = storage(settings, config.rootpath)
        self.lines: list[str] = []
        try:
            self.storage.target(settings.save, settings.save_mode == "overwrite")
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        output = session_json(self.config)
        if output is None:
            self.lines.append("mlbench: nothing saved, no benchmark ran")
            return
        try:
            path = self.storage.save_run(output, self.settings.save,
                                         self.settings.save_mode == "overwrite")
        except (BaselineError, OSError) as exc:
            self.lines.append(f"mlbench: baseline not saved: {exc}")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        self.lines.append(f"mlbench: saved baseline {path}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line in self.lines:
            terminalreporter.write_line(line)


class GateSession:
    """``--mlbench-gate``: load the baseline up front (a bad file is a usage error), compare at
    session finish, fail the session for significant slowdowns beyond the threshold."""

    def __init__(self, config: pytest.Config, settings: GateSettings) -> None:
        self.config, self.settings = config, settings
        try:
            self.path = storage(settings, config.rootpath).resolve(settings.gate)
            self.baseline = load_run(self.path)
        except BaselineError as exc:
            raise pytest.UsageError(f"--mlbench-gate: {exc}") from None
        self.machine_diff = fingerprint.differences(
            fingerprint.fingerprint(self.baseline.get("machine_info", {})),
            fingerprint.fingerprint(current_machine_info()))
        self.thresholds: dict[str, float] = {}
        self.comparisons: list[Comparison] = []
        self.skipped: list[str] = []

    def warn_machine(self) -> None:
        if self.machine_diff:
            self.config.issue_config_time_warning(pytest.PytestWarning(
                f"mlbench: baseline {self.path} comes from a different machine fingerprint: "
                + "; ".join(self.machine_diff)), stacklevel=2)

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        marker = item.get_closest_marker("mlbench_gate")
        if marker is None:
            return
        value = marker.kwargs.get("threshold", marker.args[0] if marker.args else None)
        try:
            self.thresholds[item.nodeid] = parse_percent(str(value))
        except OptionError as exc:
            pytest.fail(f"@pytest.mark.mlbench_gate(threshold=...): {exc}", pytrace=False)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        current = session_json(self.config)
        if current is None:
            return
        self.comparisons = compare_runs(self.baseline, current, threshold=self.settings.threshold,
                                        alpha=self.settings.alpha, thresholds=self.thresholds)
        self.skipped = unmatched(self.baseline, current)
        if any(c.failed for c in self.comparisons) and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)  # after pytest-benchmark's tables, last thing on screen
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        tr.section(f"mlbench gate against {self.path} (per training step)")
        for line in [f"machine differs: {d}" for d in self.machine_diff]:
            tr.write_line(line, yellow=True)
        if self.comparisons:
            for line in table(self.comparisons):
                tr.write_line(line)
        if self.skipped:
            tr.write_line(f"not in the baseline or without raw rounds: {', '.join(self.skipped)}")
        failed = any(c.failed for c in self.comparisons)
        tr.write_line(summary(self.comparisons) if self.comparisons
                      else "mlbench gate: no benchmark to compare", red=failed, green=not failed)


def register(config: pytest.Config, settings: GateSettings) -> None:
    """Called by plugin.py's pytest_configure."""
    if settings.save:
        config.pluginmanager.register(SaveSession(config, settings), "mlbench-save")
    if settings.gate:
        gate = GateSession(config, settings)
        gate.warn_machine()
        config.pluginmanager.register(gate, "mlbench-gate")
