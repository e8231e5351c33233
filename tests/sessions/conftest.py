"""Tests that run pytest sessions (pytester, or pytest in a subprocess): every test here is
marked ``session``, so ``pytest tests/unit`` or ``-m "not session"`` leaves them out."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.session)
