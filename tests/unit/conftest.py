"""In-process unit tests, one folder per package of pytest_mlbench (tests/unit/<package>/).

A unit test that still runs a pytest session (it asks for ``pytester``, or for the shared
``checked`` session of tests/cheats, which runs every cheater) is marked ``session`` as those in
tests/sessions/ are. A run that asks only for tests under tests/unit (``pytest
tests/unit/checking``) and chooses no markers leaves those out, saying so in one line, so that
it takes seconds; a wider run (``pytest tests``, the test line) or ``-m session`` runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent
SESSION_FIXTURES = {"pytester", "testdir", "checked"}


def _here(item: pytest.Item) -> bool:
    return HERE in item.path.parents


def _only_unit(config: pytest.Config) -> bool:
    """Every path asked for lies under tests/unit, and no -m was given."""
    if config.option.markexpr or not config.args:
        return False
    start = config.invocation_params.dir
    paths = [(start / arg.split("::")[0]).resolve() for arg in config.args]
    return all(path == HERE or HERE in path.parents for path in paths)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    session = [item for item in items
               if _here(item) and SESSION_FIXTURES & set(getattr(item, "fixturenames", ()))]
    for item in session:
        item.add_marker(pytest.mark.session)
    if session and _only_unit(config):
        left = set(session)
        items[:] = [item for item in items if item not in left]
        config.hook.pytest_deselected(items=session)
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"tests/unit: {len(session)} test(s) that run a pytest session left "
                                "out (run them with -m session, or with pytest tests)")
