"""Stand-in for plugin.py's wiring of the save and gate sessions, loaded with
``-p no:mlbench -p tests.session_plugin``: options.py's gate options plus
--mlbench-save-partial, the mlbench_gate marker, and ``baseline_sessions.register``. The session tests
then exercise baseline_sessions.py without the case engine (which plugin.py also loads)."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_mlbench import baseline_sessions
from pytest_mlbench.options import GateSettings, OptionError, build_gate_settings, gate_option_table


@dataclasses.dataclass(frozen=True)
class Settings(GateSettings):
    save_partial: bool = False


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mlbench")
    for option in gate_option_table():
        group.addoption(option.flag, dest=option.key, default=None)
    group.addoption(baseline_sessions.PARTIAL_OPTION, action="store_true", dest="mlbench_save_partial")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", baseline_sessions.MARKER)
    try:
        gate = build_gate_settings({o.name: config.getoption(o.key) for o in gate_option_table()})
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    settings = Settings(**dataclasses.asdict(gate),
                        save_partial=config.getoption("mlbench_save_partial"))
    baseline_sessions.register(config, settings)
