"""The pytest session objects of ``--mlbench-save`` and ``--mlbench-gate``.

plugin.py calls ``register(config, gate_settings)`` from ``pytest_configure``, the way
pytest-benchmark registers its BenchmarkSession. Everything knowable before the run is refused
there, as one-line usage errors: options that leave nothing to time (--benchmark-disable,
--benchmark-skip, pytest-xdist), a baselines folder or name that cannot be written, a baseline
that cannot be read or trusted. At session finish the save publishes the run only when the
session succeeded (or, with --mlbench-save-partial, as a partial run), and the gate judges;
their lines come last in the terminal summary, and the gate's verdict is a test report pytest
counts (judging/verdict.py): a failed gate makes the session's last line read ``1 failed``.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import pytest
from pytest_benchmark.utils import safe_dumps

from pytest_mlbench import __version__
from pytest_mlbench.judging import regression, verdict
from pytest_mlbench.options import GATE_MARKER, GateSettings, OptionError, parse_percent
from pytest_mlbench.storing import fingerprint, machine, runs
from pytest_mlbench.storing.baselines import BaselineError, BaselineStorage, is_explicit

MARKER = GATE_MARKER
PARTIAL_OPTION = "--mlbench-save-partial"
INCOMPLETE = {pytest.ExitCode.INTERRUPTED: "interrupted",
              pytest.ExitCode.TESTS_FAILED: "tests failed or errored",
              pytest.ExitCode.INTERNAL_ERROR: "internal error",
              pytest.ExitCode.USAGE_ERROR: "usage error",
              pytest.ExitCode.NO_TESTS_COLLECTED: "no tests collected"}


def incomplete(exitstatus: int) -> str:
    """Why a session with this exit status did not complete, in a few words."""
    try:
        return INCOMPLETE[pytest.ExitCode(exitstatus)]
    except (ValueError, KeyError):
        return f"exit status {exitstatus}"


def current_machine_info() -> dict[str, Any]:
    """This machine's facts as a saved run would carry them (for its id and fingerprint)."""
    return {"mlbench": machine.machine_info(), "python_version": platform.python_version()}


def storage(settings: GateSettings, rootpath: Path) -> BaselineStorage:
    root = Path(settings.baselines)
    root = root if root.is_absolute() else rootpath / root
    return BaselineStorage(root, fingerprint.machine_id(current_machine_info()))


def conflict(config: pytest.Config) -> str | None:
    """What in this session would leave the save or the gate without timings."""
    if not config.pluginmanager.hasplugin("benchmark"):
        return "pytest-benchmark is disabled (-p no:benchmark); pytest-mlbench times through it"
    if config.getoption("benchmark_disable") and not config.getoption("benchmark_enable"):
        return "--benchmark-disable turns timing off, so there would be nothing to save or judge"
    if config.getoption("benchmark_skip"):
        return "--benchmark-skip skips every benchmark, so there would be nothing to save or judge"
    if config.getoption("dist", "no") != "no" or os.environ.get("PYTEST_XDIST_WORKER"):
        return ("pytest-xdist is active (-n/--dist): timings must run serially; drop -n "
                "(pytest-benchmark also turns itself off under xdist)")
    return None


def session_json(config: pytest.Config) -> dict[str, Any] | None:
    """This session's run as pytest-benchmark's JSON, raw rounds included, via its own hooks;
    ``machine_info["mlbench"]`` is added when no hook did, so a saved run has its machine."""
    bs = config._benchmarksession  # type: ignore[attr-defined]
    # a benchmark interrupted mid-run (Ctrl-C) is listed with no rounds: leave it out, as
    # pytest-benchmark's own tables do (its JSON writer would fail on it)
    benchmarks = [b for b in bs.benchmarks if b]
    if not benchmarks:
        return None
    machine_info = bs.get_machine_info()
    commit_info = config.hook.pytest_benchmark_generate_commit_info(config=config)
    config.hook.pytest_benchmark_update_commit_info(config=config, commit_info=commit_info)
    output = config.hook.pytest_benchmark_generate_json(
        config=config, benchmarks=benchmarks, include_data=True, machine_info=machine_info,
        commit_info=commit_info)
    config.hook.pytest_benchmark_update_json(config=config, benchmarks=benchmarks,
                                             output_json=output)
    output["machine_info"].setdefault("mlbench", machine.machine_info())
    return dict(output)


class SaveSession:
    """``--mlbench-save``: checked before the run, published at the end if the run is whole."""

    def __init__(self, config: pytest.Config, settings: GateSettings,
                 store: BaselineStorage) -> None:
        self.config, self.settings, self.storage = config, settings, store
        # GateSettings.save_partial: the --mlbench-save-partial switch (options.py)
        self.partial_ok = bool(getattr(settings, "save_partial", False))
        store.preflight(settings.save, settings.save_mode)
        self.lines: list[str] = []

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # ``exitstatus`` is the tests' outcome, whatever the gate then sets on the session
        line, failed = self.save(int(exitstatus))
        self.lines.append(line)
        if failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = failed

    def save(self, exitstatus: int) -> tuple[str, int]:
        """The line to print and the exit status to set (0: none)."""
        why = incomplete(exitstatus)
        partial = exitstatus != pytest.ExitCode.OK
        if partial and not self.partial_ok:
            return (f"mlbench: baseline not saved: the session did not complete ({why}); pass "
                    f"{PARTIAL_OPTION} to keep it as a partial run", 0)
        output = session_json(self.config)
        if output is None:
            return "mlbench: nothing saved: no benchmark ran", pytest.ExitCode.TESTS_FAILED
        output["mlbench"] = {"partial": partial, "exitstatus": exitstatus,
                             "incomplete": why if partial else None, "version": __version__}
        payload = safe_dumps(output, ensure_ascii=True, indent=4).encode()
        try:
            path = self.storage.save(payload, self.settings.save, mode=self.settings.save_mode,
                                     partial=partial)
        except (BaselineError, OSError) as exc:
            return f"mlbench: baseline not saved: {exc}", pytest.ExitCode.USAGE_ERROR
        kind = f"partial run ({why})" if partial else "baseline"
        return f"mlbench: saved {kind} {path}", 0

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line in self.lines:
            terminalreporter.write_line(line, red="not saved" in line or "nothing" in line)


class GateSession:
    """``--mlbench-gate``: the baseline is loaded and checked before the run, this session's
    records are judged against it at the end; a slowdown or nothing judged fails."""

    def __init__(self, config: pytest.Config, settings: GateSettings,
                 store: BaselineStorage) -> None:
        self.config, self.settings = config, settings
        self.path = store.resolve(settings.gate)
        self.baseline = runs.load_run(self.path)
        if self.baseline.partial and not is_explicit(settings.gate):
            raise BaselineError(f"{self.path}: a partial run (saved from an interrupted or "
                                "failed session); name the file to gate against it anyway")
        self.thresholds: dict[str, float] = {}
        self.judgement: regression.Judgement | None = None
        self.lines: list[str] = []

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        marker = item.get_closest_marker("mlbench_gate")
        if marker is None:
            return
        value = marker.kwargs.get("threshold", marker.args[0] if marker.args else None)
        try:
            self.thresholds[item.nodeid] = parse_percent(str(value))
        except OptionError as exc:
            pytest.fail(f"@pytest.mark.mlbench_gate(threshold=...): {exc}", pytrace=False)

    @pytest.hookimpl(tryfirst=True)  # its verdict's report before --junitxml writes its file
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        try:
            output = session_json(self.config)
            current = runs.from_json(output or {"benchmarks": []}, "this session")
        except BaselineError as exc:
            self.lines.append(f"mlbench gate: nothing judged: {exc}")
            session.exitstatus = session.exitstatus or pytest.ExitCode.TESTS_FAILED
            verdict.report(session, verdict.GATE, f"nothing judged: {exc}")
            return
        self.lines = self.machine_lines(current.machine_info if output else None)
        self.judgement = regression.judge(self.baseline, current,
                                          threshold=self.settings.threshold,
                                          alpha=self.settings.alpha, thresholds=self.thresholds)
        if regression.fails(self.judgement) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        verdict.report(session, verdict.GATE, regression.failed_line(self.judgement))

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: Any) -> tuple[str, str, str] | None:
        return verdict.status(report)

    def machine_lines(self, machine_info: Any) -> list[str]:
        mine = fingerprint.fingerprint(machine_info or current_machine_info())
        theirs = fingerprint.fingerprint(self.baseline.machine_info)
        lines = [f"machine differs: {d}" for d in fingerprint.differences(theirs, mine)]
        if self.baseline.partial:
            lines.append(f"baseline {self.path} is a partial run (from an interrupted or failed "
                         "session)")
        return lines

    @pytest.hookimpl(trylast=True)  # after pytest-benchmark's tables, last thing on screen
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr, j = terminalreporter, self.judgement
        tr.section(f"mlbench gate against {self.path} (seconds per step)")
        for line in self.lines:
            tr.write_line(line, yellow=True)
        if j is None:
            return
        for line in (regression.table(j.rows) if j.rows else []) + regression.details(j):
            tr.write_line(line)
        failed = regression.fails(j)
        tr.write_line(regression.summary(j), red=failed, green=not failed)


def register(config: pytest.Config, settings: GateSettings) -> None:
    """Called by plugin.py's pytest_configure; pytest.UsageError (one line) for anything that
    would make the save or the gate fail after the run."""
    flags = [f for f, on in (("--mlbench-save", settings.save), ("--mlbench-gate", settings.gate))
             if on]
    if not flags:
        return
    why = conflict(config)
    if why is not None:
        raise pytest.UsageError(f"{' and '.join(flags)}: refused: {why}")
    store = storage(settings, config.rootpath)
    sessions: list[tuple[str, Any]] = []
    for flag, make in (("--mlbench-save", SaveSession), ("--mlbench-gate", GateSession)):
        if flag in flags:
            try:
                sessions.append((flag, make(config, settings, store)))
            except BaselineError as exc:
                raise pytest.UsageError(f"{flag}: {exc}") from None
    for flag, session in sessions:
        config.pluginmanager.register(session, "mlbench-" + flag.rsplit("-", 1)[-1])
