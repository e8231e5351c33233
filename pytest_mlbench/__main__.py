"""``python -m pytest_mlbench report ...``: the ``pytest-mlbench`` command; see pytest_mlbench.cli."""

from __future__ import annotations

from pytest_mlbench.cli import main

raise SystemExit(main())
