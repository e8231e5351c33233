"""The state of one pytest session's benchmark run: settings, adapters, the catalogue, the
campaign and its outcomes. plugin.py wires pytest to it; it never touches pytest internals
beyond the session's items and pytest-benchmark's options.

The campaign runs, for every selected case at once, on a thread of its own: a session that
times starts it when the first case's test asks for its outcome and waits for it there (nothing
else runs while it times); a session that times nothing (``--benchmark-disable``) starts it as
the first test of the session starts, so that its cases are checked while the session's other
tests run, and the first case waits for what is left. Its workers start from the process as it
was then (``Launch``): a test's monkeypatched environment never reaches them. Its progress
lines are written by the main thread, between tests, so they never pass another test's output
capture. A session that collects no mlbench case never discovers workloads, never starts a
worker and never adds anything to pytest-benchmark's output.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Mapping
from concurrent import futures
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mlbench import frameworks
from pytest_mlbench.options import Settings

if TYPE_CHECKING:  # the rest loads when a session runs the plugin's cases (a guest starts light)
    from pytest_mlbench.checking.oracle_client import OracleService
    from pytest_mlbench.judging.ab import ABSession, BaseSide
    from pytest_mlbench.measuring.campaign import Campaign
    from pytest_mlbench.measuring.outcome import Outcome
    from pytest_mlbench.measuring.plan import Lane, Plan
    from pytest_mlbench.storing.record import Record
    from pytest_mlbench.workloads.case import CaseId
    from pytest_mlbench.workloads.catalogue import Catalogue

CASE_FIXTURE = "mlbench_case"
OWN_FIXTURES = ("mlbench_case", "mlbench_workload", "mlbench_framework", "mlbench_device",
                "mlbench_precision", "mlbench_rng", "mlbench_settings")


class RunState:
    def __init__(self, config: pytest.Config, settings: Settings,
                 registry: Mapping[str, Any]) -> None:
        self.config, self.settings, self.registry = config, settings, dict(registry)
        self.own_items = False  # set at collection: does this session run our cases?
        self.unused: list[str] = []  # options given that the session does not use, a line each
        self._catalogue: Catalogue | None = None
        self.outcomes: dict[str, Outcome] | None = None
        self.records: list[Record] = []
        self._oracle: OracleService | None = None
        self._writing = threading.Lock()
        self.ab: ABSession | None = None  # --mlbench-ab: the judge, and the base side
        self.base: BaseSide | None = None
        self._campaign: Campaign | None = None
        self._thread: threading.Thread | None = None
        self._runnable: dict[str, CaseId] = {}
        self._found: Future[dict[str, Outcome]] = Future()  # the thread's outcomes, or error
        self._lines: queue.SimpleQueue[str] = queue.SimpleQueue()  # progress, for the main thread

    @property
    def root(self) -> Path:
        return self.config.rootpath / str(self.config.getini("mlbench_suites") or "suites")

    def idle_suites_line(self) -> str | None:
        """One line when the project set ``mlbench_suites`` explicitly, this session's paths
        reach that folder, it holds workload folders, and yet no collected test asks for the
        plugin's fixtures (so nothing of it would run, silently); None otherwise: a project
        that never configured the plugin hears nothing from it."""
        if not self.config.getini("mlbench_suites"):
            return None
        root = self.root.resolve()
        paths = [Path(a.split("::")[0]).resolve() for a in self.config.args]
        if not any(p == root or root in p.parents or p in root.parents for p in paths):
            return None
        specs = sorted(p.parent.name for p in root.glob("*/spec.py"))
        if not specs:
            return None
        return (f"mlbench: {root} holds {len(specs)} workload(s) ({', '.join(specs[:5])}"
                f"{', ...' if len(specs) > 5 else ''}) but no collected test asks for "
                "mlbench_case or mlbench_workload, so none of them runs: add the two tests "
                "of `pytest-mlbench init` (test_workloads.py) to that folder")

    @property
    def oracle(self) -> OracleService:
        """The float64 autodiff oracle's service, made on first use (it starts no process
        until a reference needs one)."""
        if self._oracle is None:
            from pytest_mlbench.checking.oracle_client import OracleService

            self._oracle = OracleService()
        return self._oracle

    @property
    def catalogue(self) -> Catalogue:
        if self._catalogue is None:
            from pytest_mlbench.workloads import catalogue

            self._catalogue = catalogue.discover(self.root, self.registry)
        return self._catalogue

    def cases(self, found_in: Catalogue | None = None) -> list[CaseId]:
        from pytest_mlbench import parametrize

        source = found_in or self.catalogue
        found = list(parametrize.enumerate_cases(source.workloads, self.settings,
                                                 self.registry))
        self.config.hook.pytest_mlbench_modify_cases(config=self.config, cases=found)
        return found

    # -- the campaign -----------------------------------------------------------------------

    def plan(self) -> Plan:
        from pytest_mlbench.measuring.plan import Plan

        bench = getattr(self.config, "_benchmarksession", None)
        timing = bench is not None and not bench.disabled
        opt = self.config.getoption
        return Plan(timing=timing, processes=self.settings.processes,
                    threads=self.settings.threads, affinity=self.settings.affinity,
                    seed=self.settings.seed, size=self.settings.size,
                    max_time=float(opt("benchmark_max_time", 1.0) or 1.0),
                    min_rounds=int(opt("benchmark_min_rounds", 5) or 5),
                    compile_cache=self.compile_cache(), hosts=self.settings.hosts,
                    listen=self.settings.listen,
                    external_wait_s=float(self.settings.wait_workers))

    def compile_cache(self) -> str:
        """The compile cache's folder (--mlbench-compile-cache, else the default), or cold."""
        from pytest_mlbench.storing import compile_cache

        return compile_cache.resolve(self.settings.compile_cache)

    def estimate_line(self, items: list[pytest.Item]) -> str | None:
        """How long this timed session should take on this host (jobs.estimate), for a CPU
        session at the default size (the size the estimate's pace was measured at)."""
        from pytest_mlbench.workloads.case import CaseId

        if not self.plan().timing or self.settings.size != "default":
            return None
        cases = [c for c in (_case_of(i) for i in items if i.get_closest_marker("skip") is None)
                 if isinstance(c, CaseId)]
        if not cases or any(c.device != "cpu" for c in cases):
            return None
        from pytest_mlbench import jobs
        from pytest_mlbench.measuring import cache_plan, hostspeed

        warm = cache_plan.filled(self.compile_cache(), self.catalogue, cases)
        return jobs.estimate_line(len(cases), warm, self.settings.processes,
                                  hostspeed.loop_ms())

    def prepare_compile_cache(self) -> None:
        """Make the compile cache's folder as the session collects its cases; a folder that
        cannot be made is a usage error (one line, exit 4)."""
        from pytest_mlbench.storing import compile_cache

        folder = self.compile_cache()
        if folder != compile_cache.COLD:
            try:
                compile_cache.prepare(folder)
            except compile_cache.CacheError as exc:
                raise pytest.UsageError(str(exc)) from None

    def host_probe(self) -> dict[str, Any]:
        """The host's speed before each timed pass (measuring/hostspeed.py); empty if nothing was timed."""
        campaign = self._campaign
        return campaign.host.to_json() if campaign and campaign.host.readings else {}

    def time_spent(self) -> dict[str, Any]:
        """Where the campaign's seconds went (timesheet.py); empty if no campaign ran."""
        campaign = self._campaign
        return campaign.sheet.to_json() if campaign else {}

    @property
    def campaign_started(self) -> bool:
        return self._thread is not None

    def begin(self, session: pytest.Session) -> None:
        """As the session's first test starts: a campaign that times nothing starts now, beside
        the other tests (a timed one waits for its first case, so that nothing runs beside it)."""
        if self.own_items and self._thread is None and not self.plan().timing \
                and self._selected(session):
            self._start(session)

    def _selected(self, session: pytest.Session) -> dict[str, CaseId]:
        from pytest_mlbench.parametrize import unfit
        from pytest_mlbench.workloads.case import CaseId

        # a shape made for another device skips at collection (parametrize.case_params)
        return {c.name: c for c in (_case_of(item) for item in session.items)
                if isinstance(c, CaseId) and not _skipped(c, self.registry)
                and unfit(c, self.settings) is None
                and c.layout.unfit() is None}  # a layout its counts cannot make: skipped too

    def _start(self, session: pytest.Session) -> None:
        from pytest_mlbench.engine.launcher import Launch
        from pytest_mlbench.measuring.campaign import Campaign
        from pytest_mlbench.measuring.plan import Lane, Side

        self._runnable = self._selected(session)
        entries = {name: frameworks.entry(self.registry[name]) for name in self.registry}
        lanes = [Lane(Side(root=str(self.root)), self.catalogue, tuple(self._runnable.values()))]
        if self.base is not None:
            lanes.append(self._base_lane(self._runnable))
        self.oracle.launch = launch = Launch.now()
        self._campaign = Campaign(lanes, self.plan(), entries, self.oracle, self._lines.put,
                                  launch)
        self._thread = threading.Thread(target=self._run, args=(self._campaign,), daemon=True,
                                        name="mlbench-campaign")
        self._thread.start()

    def _run(self, campaign: Campaign) -> None:
        try:
            self._found.set_result(campaign.run())
        except BaseException as exc:  # handed to the main thread, which raises it
            self._found.set_exception(exc)

    def outcome(self, cid: CaseId, session: pytest.Session) -> Outcome:
        if self.outcomes is None:
            if self._thread is None:
                self._start(session)
            self._wait()
            self.outcomes = self._found.result(timeout=0)  # raises the campaign's error
            self._judge_ab(self._runnable)
        from pytest_mlbench.measuring.outcome import Outcome

        return self.outcomes.get(cid.name) or Outcome(
            "error", f"{cid.name} was not part of this session's campaign")

    def _wait(self) -> None:
        """Until the campaign's thread ends, writing its progress lines as they come; Ctrl-C
        cancels the campaign (its workers end) before it goes on.

        The campaign's end is its outcome's Future, never ``Thread.join``/``is_alive``: a
        Ctrl-C that interrupts a join marks a thread still running as ended (CPython before
        3.13 releases the thread's own lock on the way out), and the campaign was then never
        cancelled: the session waited at exit for the call in flight (a GPU compile outlasted
        the 30 s a cut session gets, docs/GPU.md run 14)."""
        assert self._thread is not None and self._campaign is not None
        try:
            while not self._ended(0.2):
                self.flush()
        except BaseException:
            self._stop()
            raise
        self.flush()

    def _ended(self, timeout: float | None) -> bool:
        """Whether the campaign has ended, after waiting ``timeout`` seconds at most."""
        futures.wait([self._found], timeout)
        return self._found.done()

    def _stop(self) -> None:
        if self._thread is not None and self._campaign is not None and not self._found.done():
            self._campaign.cancel()
            self._ended(None)

    def flush(self) -> None:
        """The campaign's progress lines so far, from the main thread (between tests, or while
        a case's test waits for the campaign)."""
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return
            self.progress(line)

    def _base_lane(self, runnable: Mapping[str, CaseId]) -> Lane:
        """The base revision's cases of the same names, from the base's own catalogue."""
        from pytest_mlbench.measuring.plan import Lane
        from pytest_mlbench.workloads import catalogue

        assert self.base is not None
        found = catalogue.discover(Path(self.base.side.root), self.registry)
        cases = tuple(c for c in self.cases(found) if c.name in runnable)
        return Lane(self.base.side, found, cases)

    def _judge_ab(self, runnable: Mapping[str, CaseId]) -> None:
        if self.ab is None or self.outcomes is None:
            return
        from pytest_mlbench.judging.ab import BASE
        from pytest_mlbench.measuring.outcome import key_of
        from pytest_mlbench.measuring.plan import Side

        base = Side(BASE)
        self.ab.judge({name: (self.outcomes.get(key_of(base, cid)), self.outcomes[name])
                       for name, cid in runnable.items()})

    def progress(self, line: str) -> None:
        """A line on the terminal now, past pytest's output capture (a case's test may be
        waiting for the campaign), the way pytest's live logging writes; main thread only."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        with self._writing:
            suspended = (capture.global_and_fixture_disabled() if capture
                         else contextlib.nullcontext())
            with suspended:
                reporter.ensure_newline()
                reporter.write_line(line)

    def close(self) -> None:
        self._stop()  # a session that ends early (-x, Ctrl-C) ends a campaign still running
        if self._oracle is not None:
            self._oracle.close()
        if self.base is not None:
            self.base.close()


def unsupported_at(item: pytest.Item, catalogue: Catalogue,
                   message: str) -> tuple[str, int] | None:
    """The spec file and line of the ``unsupported`` entry whose reason skipped this item's
    case with ``message``, for the skip's location (plugin.pytest_runtest_makereport); None
    for any other item or skip."""
    from pytest_mlbench.workloads import catalogue as found
    from pytest_mlbench.workloads.case import CaseId

    cid = _case_of(item)
    parts = (cid.framework, cid.variant, cid.device, cid.precision, cid.task.label) \
        if isinstance(cid, CaseId) else ()
    reason = cid.workload.unsupported_reason(*parts) if parts else None
    if not reason or reason not in message:
        return None
    at = found.unsupported_at(catalogue.folder(cid.workload.name), cid.workload, *parts)
    return (str(at[0]), at[1]) if at else None


def case_keywords(item: pytest.Item) -> set[str]:
    """Words ``-k`` also finds a case by, beyond its id: its task's label, kind and optimizer
    (``-k adam`` selects gpt's Adam training, whose id names no task since gpt has one)."""
    cid = _case_of(item)
    task = getattr(cid, "task", None)
    if task is None:
        return set()
    return {task.label, task.kind} | ({task.optimizer.name} if task.optimizer else set())


def _case_of(item: pytest.Item) -> Any:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(CASE_FIXTURE) if callspec is not None else None


def _skipped(cid: CaseId, registry: Mapping[str, Any]) -> bool:
    return frameworks.missing_reason(cid.framework, dict(registry)) is not None


def uses_own_fixtures(item: pytest.Item) -> bool:
    names: list[str] = list(getattr(item, "fixturenames", ()))
    return any(name in OWN_FIXTURES for name in names)

