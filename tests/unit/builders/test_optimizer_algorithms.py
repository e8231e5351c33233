"""One optimizer algorithm per task in every framework: each framework's built optimizer
(optax, torch.optim, Keras; the spec's update for NumPy and Autograd), in every variant,
stepped at float64 where epsilon's placement, a float32 step count or a float32 constant would
show (tests/optimizer_algorithms.py), matches workloads/optim.py's float64 update to 1e-12 of what moved;
and the optimizers the frameworks ship where they differ (Keras's Adam and AdamW: epsilon on
the uncorrected root; torch.compile'd Adam with torch's float32 step count) are caught.

One process per framework, as the workers run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_mlbench import frameworks

ROOT = Path(__file__).resolve().parents[3]
TOLERANCE = 1e-12  # float64 rounding of six steps is ~1e-15; a float32 constant is ~1e-8
TIMEOUT_S = 300


_runs: dict[str, list[dict[str, Any]]] = {}


def run(framework: str) -> list[dict[str, Any]]:
    """The runner's JSON lines for ``framework`` (one process each, run once); the framework
    skips when not installed."""
    if framework not in _runs:
        _runs[framework] = start(framework)
    return _runs[framework]


def start(framework: str) -> list[dict[str, Any]]:
    reason = frameworks.missing_reason(framework, frameworks.BUILTIN)
    if reason:
        pytest.skip(reason)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, "-m", "tests.optimizer_algorithms", framework],
                          cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise AssertionError(f"tests.optimizer_algorithms {framework} exited with "
                             f"{done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    return lines


def worst(line: dict[str, Any]) -> tuple[str, float]:
    name, error = max(line["errors"].items(), key=lambda kv: kv[1])
    return name, float(error)


@pytest.mark.parametrize("framework", ["numpy", "autograd", "jax", "torch", "tensorflow"])
def test_every_framework_runs_the_spec_algorithm_at_float64(framework: str) -> None:
    lines = [line for line in run(framework)
             if not line["stock"] and line["variant"] != "bfloat16"]
    assert {line["optimizer"] for line in lines} == {"sgd", "momentum", "adam", "adamw"}
    off = [f"{line['optimizer']} {line['variant']}: {name} differs by {error:.2e} of its norm"
           for line in lines for name, error in [worst(line)] if not error <= TOLERANCE]
    assert not off, (f"{framework}'s optimizers are not workloads/optim.py's algorithm at float64 "
                     f"(tolerance {TOLERANCE:g}): " + "; ".join(off))


@pytest.mark.parametrize(("framework", "least"), [
    ("tensorflow", 1e-2),  # Keras's Adam, epsilon on sqrt(v): tens of percent on this problem
    ("torch", 1e-7),  # torch.compile'd Adam with its float32 count: 1 - 0.999^t in float32
])
def test_the_shipped_optimizers_that_differ_are_caught(framework: str, least: float) -> None:
    lines = [line for line in run(framework) if line["stock"]]
    assert {line["optimizer"] for line in lines} == {"adam", "adamw"}
    for line in lines:
        name, error = worst(line)
        assert error > least, (f"stock {framework} {line['optimizer']} {line['variant']} "
                               f"passed as the spec's algorithm ({name}: {error:.2e})")


def test_kerases_adam_at_bfloat16_follows_the_float64_steps() -> None:
    """Within bfloat16's rounding (8 bits: 2% on this problem), not v stuck at zero."""
    lines = [line for line in run("tensorflow") if line["variant"] == "bfloat16"]
    assert {line["optimizer"] for line in lines} == {"adam", "adamw"}
    for line in lines:
        error = line["errors"]["w"]
        assert error < 5e-2, (f"tensorflow {line['optimizer']} at bfloat16: its displacement "
                              f"differs from the float64 steps' by {error:.2e} of its norm "
                              "(tolerance 5e-2)")
