"""The state of one pytest session's benchmark run: settings, adapters, the catalogue, the
campaign and its outcomes. plugin.py wires pytest to it; it never touches pytest internals
beyond the session's items and pytest-benchmark's options.

The campaign is lazy: it runs, for every selected case at once, when the first case's test
asks for its outcome. A session that collects no mlbench case never discovers workloads, never
starts a worker and never adds anything to pytest-benchmark's output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_mlbench import catalogue, frameworks, parametrize
from pytest_mlbench.campaign import Campaign, Outcome, Plan
from pytest_mlbench.case import CaseId
from pytest_mlbench.options import Settings
from pytest_mlbench.record import Record
from pytest_mlbench.reference import OracleService

CASE_FIXTURE = "mlbench_case"
OWN_FIXTURES = ("mlbench_case", "mlbench_workload", "mlbench_framework", "mlbench_device",
                "mlbench_precision", "mlbench_rng", "mlbench_settings")


class RunState:
    def __init__(self, config: pytest.Config, settings: Settings,
                 registry: Mapping[str, Any]) -> None:
        self.config, self.settings, self.registry = config, settings, dict(registry)
        self.own_items = False  # set at collection: does this session run our cases?
        self._catalogue: catalogue.Catalogue | None = None
        self.outcomes: dict[str, Outcome] | None = None
        self.records: list[Record] = []
        self.oracle = OracleService()

    @property
    def root(self) -> Path:
        return self.config.rootpath / str(self.config.getini("mlbench_suites") or "suites")

    @property
    def catalogue(self) -> catalogue.Catalogue:
        if self._catalogue is None:
            self._catalogue = catalogue.discover(self.root, self.registry)
        return self._catalogue

    def cases(self) -> list[CaseId]:
        found = list(parametrize.enumerate_cases(self.catalogue.workloads, self.settings,
                                                 self.registry))
        self.config.hook.pytest_mlbench_modify_cases(config=self.config, cases=found)
        return found

    # -- the campaign -----------------------------------------------------------------------

    def plan(self) -> Plan:
        bench = getattr(self.config, "_benchmarksession", None)
        timing = bench is not None and not bench.disabled
        opt = self.config.getoption
        return Plan(timing=timing, processes=self.settings.processes,
                    threads=self.settings.threads, affinity=self.settings.affinity,
                    seed=self.settings.seed, size=self.settings.size,
                    max_time=float(opt("benchmark_max_time", 1.0) or 1.0),
                    min_rounds=int(opt("benchmark_min_rounds", 5) or 5))

    def outcome(self, cid: CaseId, session: pytest.Session) -> Outcome:
        if self.outcomes is None:
            selected = [c for c in (_case_of(item) for item in session.items)
                        if isinstance(c, CaseId) and not _skipped(c, self.registry)]
            runnable = {c.name: c for c in selected}
            entries = {name: frameworks.entry(self.registry[name]) for name in self.registry}
            campaign = Campaign(list(runnable.values()), self.plan(), self.catalogue, entries,
                                self.oracle, self.progress)
            self.outcomes = campaign.run()
        return self.outcomes.get(cid.name) or Outcome(
            "error", f"{cid.name} was not part of this session's campaign")

    def progress(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(line)

    def close(self) -> None:
        self.oracle.close()


def _case_of(item: pytest.Item) -> Any:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(CASE_FIXTURE) if callspec is not None else None


def _skipped(cid: CaseId, registry: Mapping[str, Any]) -> bool:
    return frameworks.missing_reason(cid.framework, dict(registry)) is not None


def uses_own_fixtures(item: pytest.Item) -> bool:
    names: Callable[[], Any] = getattr(item, "fixturenames", ())  # type: ignore[assignment]
    return any(name in OWN_FIXTURES for name in names)
