"""Parallel cases in sessions of their own, in the background lane (tests/background.py):

- the project's mlp, gpt and vit in JAX and PyTorch at four workers, each strategy and the 2-D
  mesh, Adam included (gpt), every check of a single-device case plus the sharding check (the
  suites' own check-only campaign in the test line runs one and two workers); four workers on
  a 2-core host share cores: about 35 s;
- timed: the mlp's dp and fsdp at two workers, one process: the record keeps what each worker
  holds and the share of a step in collectives, and the scaling table is printed: about 10 s;
- two nodes: the honest seed MLP's dp case launched as two groups of processes (torch's
  env:// rendezvous from torchrun's environment, jax.distributed with a process a node), and a
  case whose rank 1 is killed mid-run, which fails naming the rank and leaves no process
  behind: about 10 s;
- two "hosts" (tools/two_hosts.sh, issue 48): the same MLP's fsdp and tp and the killed rank
  on workers that launchers started apart from the session (torchrun, the command-line
  worker), timed, with strangers refused at the port: about 30 s."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import os
import re
import socket
import sys
from pathlib import Path

import psutil
import pytest

from tests import background
from tests.background import Command
from tests.cheat_session import command, parse

OWNER = "MLBENCH_TEST_OWNER"  # marks the processes the two-node session starts

ROOT = Path(__file__).resolve().parents[2]
needs_frameworks = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("jax", "torch")),
    reason="the parallel engines need jax and torch installed")


def project_cases(*args: str, timed: bool = False) -> Command:
    """A session over the project's own suites: smoke size, one thread, JAX and torch."""
    return Command([str(ROOT / "suites"), "-p", "no:cacheprovider", "-q",
                    "--mlbench-size=smoke", "--mlbench-threads=1",
                    "--mlbench-frameworks=jax,torch", *args], ROOT, timed=timed)


@background.session("four_workers")
def four_workers_command(folder: Path) -> Command:
    """Every parallel case of mlp, gpt and vit at four workers, nothing timed."""
    return project_cases("--benchmark-disable", "--mlbench-workers=4",
                         "-k", "(mlp- or gpt- or vit-) and not torch-jit",
                         f"--junitxml={folder / 'report.xml'}", "-o", "junit_family=xunit2")


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


@background.session("two_nodes")
def two_nodes_command(folder: Path) -> Command:
    """The cheat folder's honest parallel MLP and the killed rank, at two workers on two
    nodes; every process it starts carries an owner mark in its environment."""
    made = command(folder, "--benchmark-disable", "--mlbench-workers=2", "--mlbench-nodes=2",
                   "--mlbench-frameworks=jax,torch", "-k", "(dphonest and -dp-w2) or nodekill")
    return dataclasses.replace(made, env={**made.env, OWNER: f"two-nodes-{os.getpid()}"})


@pytest.fixture
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> background.Done:
    return background.result("two_nodes", tmp_path_factory)


def marked(owner: str) -> set[int]:
    """Live processes anywhere on the machine whose environment carries ``owner``."""
    found = set()
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(OWNER) == owner:
                found.add(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


@needs_frameworks
def test_two_nodes_pass_every_check_through_the_frameworks_own_launch(
        two_nodes: background.Done) -> None:
    results = parse(two_nodes.folder / "report.xml")
    honest = {f"dphonest-{impl}-dp-w2-n2-cpu-fp32" for impl in ("jax-jit", "torch-eager")}
    assert honest <= set(results), two_nodes.output[-3000:]
    bad = {k: results[k].message[:300] for k in honest if results[k].status != "passed"}
    assert not bad, bad


@needs_frameworks
@pytest.mark.parametrize("impl", ["jax-jit", "torch-eager"])
def test_a_killed_rank_fails_its_case_and_leaves_no_process_behind(
        two_nodes: background.Done, impl: str) -> None:
    result = parse(two_nodes.folder / "report.xml")[f"nodekill-{impl}-dp-w2-n2-cpu-fp32"]
    assert result.status == "failed", result
    assert "worker 1 (pid" in result.message and "signal 9 (SIGKILL)" in result.message, \
        result.message
    assert marked(f"two-nodes-{os.getpid()}") == set()


@background.session("timed_parallel")
def timed_parallel_command(folder: Path) -> Command:
    """The mlp's dp and fsdp at two workers, timed (one process, a few rounds), into JSON."""
    return project_cases("--mlbench-workers=1,2", "--mlbench-strategies=dp,fsdp",
                         "--mlbench-processes=1", "--benchmark-max-time=0.02",
                         "--mlbench-variants=jit,eager", "-k", "mlp- and (jax-jit or torch-eager)",
                         f"--benchmark-json={folder / 'run.json'}", timed=True)


@pytest.fixture
def timed_parallel(tmp_path_factory: pytest.TempPathFactory) -> background.Done:
    return background.result("timed_parallel", tmp_path_factory)


@needs_frameworks
def test_a_timed_parallel_run_records_what_each_worker_holds_and_its_collectives(
        timed_parallel: background.Done) -> None:
    """The record of each parallel case keeps every worker's bytes and each pass's share of a
    step in collectives (between 0 and 1, every worker); the session prints the scaling table
    with a row per layout."""
    import json

    assert timed_parallel.returncode == 0, timed_parallel.output[-3000:]
    run = json.loads((timed_parallel.folder / "run.json").read_text())
    found = {b["extra_info"]["mlbench"]["name"]: b["extra_info"]["mlbench"]
             for b in run["benchmarks"]}
    for impl in ("jax-jit", "torch-eager"):
        for layout in ("dp-w2", "fsdp-w2"):
            checks = found[f"mlp-{impl}-{layout}-cpu-fp32"]["checks"]
            assert {len(v) for v in checks["resident"].values()} == {2}, checks["resident"]
            [shares] = checks["collectives"]  # one pass, a share per worker
            assert len(shares) == 2 and all(0 < s <= 1 for s in shares), shares
        assert "collectives" not in found[f"mlp-{impl}-cpu-fp32"]["checks"]
    table = timed_parallel.output.split("parallel strategies, scaling")[1]
    assert all(f"{impl}" in table for impl in ("jax-jit", "torch-eager"))
    assert table.count(" dp-w2 ") == 2 and table.count(" fsdp-w2 ") == 2, table


# -- two "hosts" whose launchers the session did not start (issue 48) ------------------------------

@background.session("two_hosts")
def two_hosts_command(folder: Path) -> Command:
    """tools/two_hosts.sh as docs/DISTRIBUTED.md runs it, over the cheat folder's honest MLP's
    fsdp and tp and the killed rank: the session waits on a loopback port for external
    workers, each "host" launched apart from it (torchrun for torch, the command-line worker
    for JAX), and three strangers knock first (tests/sessions/strangers.py). Timed, one
    process and a few rounds: the table's rows. Every process carries an owner mark."""
    made = command(folder, "--mlbench-processes=1", "--benchmark-max-time=0.02",
                   "--benchmark-min-rounds=3", "-k", "(dphonest and (fsdp or tp-)) or nodekill")
    # a free port picked as the session starts (not when it was queued), for the session and
    # the strangers; the script's torchrun meets at the next one
    free = ("import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); "
            "print(s.getsockname()[1])")
    script = (f'export MLBENCH_PORT=$("{sys.executable}" -c "{free}") && '
              f'("{sys.executable}" {ROOT / "tests/sessions/strangers.py"} $MLBENCH_PORT &) && '
              f'exec bash {ROOT / "tools/two_hosts.sh"} "$@"')
    return dataclasses.replace(made, program=("bash", "-c", script, "two_hosts"), env={
        **made.env, OWNER: f"two-hosts-{os.getpid()}", "PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT)})


@pytest.fixture
def two_hosts(tmp_path_factory: pytest.TempPathFactory) -> background.Done:
    return background.result("two_hosts", tmp_path_factory)


@needs_frameworks
def test_workers_a_launcher_started_on_two_hosts_pass_every_check_and_strangers_are_refused(
        two_hosts: background.Done) -> None:
    """fsdp and tp in torch and JAX pass every check with ranks the session never started;
    the table's rows say external; the three strangers are each refused in one line and the
    right workers still join."""
    results = parse(two_hosts.folder / "report.xml")
    honest = {f"dphonest-{impl}-{strategy}-w2-n2-cpu-fp32"
              for impl in ("jax-jit", "torch-eager") for strategy in ("fsdp", "tp")}
    assert honest <= set(results), two_hosts.output[-3000:]
    bad = {k: results[k].message[:300] for k in honest if results[k].status != "passed"}
    assert not bad, bad
    out = two_hosts.output
    for impl in ("jax-jit", "torch-eager"):
        for strategy in ("fsdp", "tp"):
            assert f" {impl}-{strategy}-w2-n2-external " in out, out[-3000:]
    assert "run on each host: torchrun --nnodes=2 --nproc-per-node=1" in out, out[-3000:]
    refused = [line for line in out.splitlines()
               if line.startswith("mlbench: refused a worker connection from 127.0.0.1:")]
    reasons = ("proved no token", "its proof does not match this session's token",
               "sent b'GET / HTTP/1.1\\r\\n'..., which is not the pytest-mlbench handshake")
    for reason in reasons:
        assert sum(reason in line for line in refused) == 1, (reason, refused)


@needs_frameworks
@pytest.mark.parametrize("impl", ["jax-jit", "torch-eager"])
def test_a_killed_external_rank_fails_its_case_naming_it_and_leaves_no_process(
        two_hosts: background.Done, impl: str) -> None:
    """Rank 1's process killed mid-collective, on a host the session did not start: the case
    fails in one line naming the rank, its pid and host; the agents kill what is left, the
    next case's pool starts clean, and no process of the run is left on this machine."""
    result = parse(two_hosts.folder / "report.xml")[f"nodekill-{impl}-dp-w2-n2-cpu-fp32"]
    assert result.status == "failed", result
    assert re.search(rf"external worker 1 \(pid \d+ on {re.escape(socket.gethostname())}\) "
                     r"closed its connection without answering", result.message), result.message
    assert marked(f"two-hosts-{os.getpid()}") == set()
