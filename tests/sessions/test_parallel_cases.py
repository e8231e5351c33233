"""The project's own parallel cases at four workers, checked in a session of their own (the
suites' check-only campaign in the test line runs one and two workers): mlp, gpt and vit in JAX
and PyTorch, each strategy at four workers and the 2-D mesh, Adam included (gpt), every check
of a single-device case plus the sharding check. Four workers on a 2-core host share cores:
about 35 s, in the background lane (tests/background.py)."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import pytest

from tests import background
from tests.background import Command
from tests.cheat_session import parse

ROOT = Path(__file__).resolve().parents[2]
needs_frameworks = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("jax", "torch")),
    reason="the parallel engines need jax and torch installed")


@background.session("four_workers")
def four_workers_command(folder: Path) -> Command:
    """Every parallel case of mlp, gpt and vit at four workers, nothing timed."""
    return Command([str(ROOT / "suites"), "-p", "no:cacheprovider", "-q",
                    "--mlbench-size=smoke", "--benchmark-disable", "--mlbench-threads=1",
                    "--mlbench-workers=4", "--mlbench-frameworks=jax,torch",
                    "-k", "mlp- or gpt- or vit-",
                    f"--junitxml={folder / 'report.xml'}", "-o", "junit_family=xunit2"],
                   ROOT, env={"PYTHON": sys.executable})


@pytest.fixture
def four_workers(tmp_path_factory: pytest.TempPathFactory) -> background.Done:
    return background.result("four_workers", tmp_path_factory)


@needs_frameworks
def test_every_strategy_passes_its_checks_at_four_workers(four_workers: background.Done) -> None:
    results = parse(four_workers.folder / "report.xml")
    expected = {f"{workload}-{impl}-{layout}-cpu-fp32"
                for workload, impl, layout in itertools.product(
                    ("mlp", "gpt", "vit"), ("jax-jit", "torch-eager"),
                    ("dp-w4", "fsdp-w4", "tp-w4", "dp2xtp2"))}
    assert set(results) == expected, four_workers.output[-3000:]
    bad = {k: r.message[:300] for k, r in results.items() if r.status != "passed"}
    assert not bad, bad
