"""Shared by the history tests (test_history.py) and the page's browser tests
(test_history_page.py): the generated history with a step, and its page, made once a session."""

from __future__ import annotations

import contextlib
import io

import pytest

from pytest_mlbench import cli
from tests import history_runs
from tests.history_runs import Built


@pytest.fixture(scope="session")
def stepped(tmp_path_factory: pytest.TempPathFactory) -> history_runs.History:
    """40 runs x 90 cases, case STEP_CASE 15% slower from run 25 on, nothing else."""
    return history_runs.write(tmp_path_factory.mktemp("stepped") / "baselines", seed=1)


@pytest.fixture(scope="session")
def built(stepped: history_runs.History, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """``report --steps --html SITE`` of the stepped history, run once for the tests below."""
    site = tmp_path_factory.mktemp("built") / "site"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli.main(["report", "--steps", "--html", str(site), str(stepped.root)])
    return Built(status, out.getvalue(), site)
