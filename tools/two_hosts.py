"""The session's side of tools/two_hosts.sh: a parallel case whose ranks are workers that
launchers started (engine/remote.py), not children of this process.

    python tools/two_hosts.py --framework torch --strategy fsdp --listen 127.0.0.1:29555 \\
        --token-file /tmp/tok

writes the token file (mode 0600), listens, waits for the two ranks, builds mlp's
``<framework>-<strategy>-w2-n2`` case in them and runs its first commands (start, the
gradient at the start, two steps), checking every rank's reply agrees bit for bit; one line
each. It plays the part a session will play once ``--mlbench-hosts=external`` is wired in
(issue 48); it runs no timed round and none of the campaign's other checks.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import frameworks
from pytest_mlbench.engine import protocol as p
from pytest_mlbench.engine import remote
from pytest_mlbench.engine.pools import FrameworkPool, PoolKey
from pytest_mlbench.workloads import catalogue
from pytest_mlbench.workloads.case import CaseId

SUITES = Path(__file__).resolve().parents[1] / "suites"
VARIANT = {"torch": "eager", "jax": "jit"}


def same(values: list[Any], what: str) -> None:
    first = values[0]
    for rank, other in enumerate(values[1:], 1):
        for name in first:
            if not np.array_equal(np.asarray(first[name]), np.asarray(other[name])):
                raise SystemExit(f"FAILED: rank {rank}'s {what} {name} differs from rank 0's")


def main() -> int:
    a = argparse.ArgumentParser()
    a.add_argument("--framework", required=True)
    a.add_argument("--strategy", required=True)
    a.add_argument("--listen", default="127.0.0.1:29555")
    a.add_argument("--token-file", required=True)
    a.add_argument("--wait", type=float, default=120.0)
    args = a.parse_args()
    token = remote.write_token(args.token_file, remote.new_token())
    listener = remote.Listener(remote.read_token(token), remote.parse_address(args.listen),
                               token_file=token)
    pool = FrameworkPool(PoolKey(args.framework, 2, nodes=2), frameworks.BUILTIN[args.framework],
                         1, "off", "", compiler="", external=listener)
    workload = catalogue.load_workload(SUITES / "mlp")
    shape, task = workload.sizes["smoke"][0], workload.all_tasks[0]
    cid = CaseId(workload, shape, task, args.framework, VARIANT[args.framework], "cpu", "fp32",
                 workers=2, strategy=args.strategy, nodes=2)
    began = time.monotonic()
    try:
        pool.start()
        pids = pool.live().pids
        handle = pool.open(cid.spec(str(SUITES), "smoke", 0))
        started = pool.case(handle, p.Start())
        same([s.snapshot["params"] for s in started], "start")
        grads = pool.case(handle, p.Evaluate(0))
        same([g.grads for g in grads if isinstance(g, p.Gradient)], "gradient")
        stepped = pool.case(handle, p.Steps(2))
        same([s.snapshot["params"] for s in stepped], "parameters after two steps")
        print(f"{cid.name}: external, {len(started)} ranks (worker pids {pids}) agree bit for "
              f"bit at the start, on the gradient and after two steps; losses (the ranks' "
              f"mean) {[round(float(x), 6) for x in np.mean([s.losses for s in stepped], 0)]}; "
              f"{time.monotonic() - began:.1f} s",
              flush=True)
        pool.close_case(handle)
        return 0
    finally:
        pool.close()
        listener.close()


if __name__ == "__main__":
    sys.exit(main())
