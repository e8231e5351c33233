"""Stand-in for plugin.py's wiring of the save and gate sessions, loaded with
``-p no:mlbench -p tests.session_plugin``: options.py's gate options plus
--mlbench-save-partial, the mlbench_gate marker, and ``baseline_sessions.register``. The session tests
then exercise judging/sessions.py without the case engine (which plugin.py also loads)."""

from __future__ import annotations

import pytest

from pytest_mlbench.judging import sessions
from pytest_mlbench.options import OptionError, build_gate_settings, gate_option_table


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mlbench")
    for option in gate_option_table():
        extra = {"nargs": "?", "const": "yes"} if option.switch else {}
        group.addoption(option.flag, dest=option.key, default=None, **extra)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", sessions.MARKER)
    try:
        gate = build_gate_settings({o.name: config.getoption(o.key) for o in gate_option_table()})
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    sessions.register(config, gate)
