"""Does stopping a process that holds a CUDA context (SIGSTOP) stall another's GPU work?

A timed campaign stops every worker but the one it times (engine/launcher.py ``pause``). On
a GPU, no timed session has got past its first step since that was so, while sessions that
stop nothing pass (docs/GPU.md, runs 2-10). This probe answers the question directly, in
under a minute: a torch worker and a JAX worker each hold a context on GPU 0; one is stopped,
idle or in the middle of a stream of matmuls, and the other runs a synchronised matmul with a
deadline. Each answer is one line; a matmul that misses its deadline is reported with the
stuck process's Python stack (faulthandler on SIGUSR1).

    python3 tools/gpu_stop_probe.py [--deadline SECONDS] [--device gpu|cpu]

Exit status: 0 when no matmul stalled, 3 when one did, 2 when the workers could not start.
On ``--device cpu`` it runs the same steps on the CPU (what the test line can check).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time

N = 1536  # the harness's float32 peak size (engine/framework_worker.py PEAK_N)

WORKER = r'''
import faulthandler, os, signal, sys, threading, time
faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
kind, device, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == "torch":
    import torch
    dev = torch.device("cuda:0" if device == "gpu" else "cpu")
    a = torch.randn(n, n, device=dev)
    def sync(x):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        return x
    def mm():
        return sync(a @ a)
else:
    import jax, jax.numpy as jnp
    dev = jax.devices("gpu" if device == "gpu" else "cpu")[0]
    a = jax.device_put(jnp.ones((n, n), jnp.float32), dev)
    f = jax.jit(jnp.matmul)
    def mm():
        return jax.block_until_ready(f(a, a))
busy = threading.Event()
def stream():
    while True:
        busy.wait()
        mm()
threading.Thread(target=stream, daemon=True).start()
began = time.perf_counter(); mm(); first = time.perf_counter() - began
print("ready", round(first, 3), flush=True)
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "mm":
        began = time.perf_counter(); mm()
        print("done", round((time.perf_counter() - began) * 1e3, 3), flush=True)
    elif cmd == "busy":
        busy.set(); time.sleep(0.2); print("busy", flush=True)
    elif cmd == "idle":
        busy.clear(); time.sleep(0.2); mm(); print("idle", flush=True)
    elif cmd == "quit":
        break
'''


class Worker:
    def __init__(self, kind: str, device: str) -> None:
        self.kind = kind
        env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "PYTHONUNBUFFERED": "1"}
        if device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
            env["JAX_PLATFORMS"] = "cpu"
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, kind, device, str(N)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, text=True)

    def ask(self, cmd: str, deadline: float) -> str | None:
        """The worker's answer to ``cmd``, or None when it missed ``deadline`` seconds."""
        if cmd:
            assert self.proc.stdin is not None
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], deadline)
        return self.proc.stdout.readline().strip() if ready else None

    def stack(self) -> str:
        """Every thread's stack, asked for with SIGUSR1 (what the worker writes in 2 s)."""
        os.kill(self.proc.pid, signal.SIGCONT)
        os.kill(self.proc.pid, signal.SIGUSR1)
        assert self.proc.stderr is not None
        lines, end = [], time.monotonic() + 2.0
        while time.monotonic() < end:
            ready, _, _ = select.select([self.proc.stderr], [], [], 0.2)
            if ready:
                lines.append(self.proc.stderr.readline().rstrip())
        return "\n".join(line for line in lines if "File" in line or "thread" in line)

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def close(self) -> None:
        try:
            self.signal(signal.SIGCONT)
        except ProcessLookupError:
            pass
        self.proc.kill()
        self.proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=10.0)
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    args = parser.parse_args(argv)
    workers = {kind: Worker(kind, args.device) for kind in ("torch", "jax")}
    results: list[dict[str, object]] = []
    try:
        for kind, worker in workers.items():
            answer = worker.ask("", 90.0)
            if not (answer and answer.startswith("ready")):
                print(f"gpu_stop_probe: the {kind} worker did not start: {answer!r}; "
                      f"{worker.proc.stderr.read()[-600:] if worker.proc.poll() is not None else ''}")
                return 2
            print(f"gpu_stop_probe: {kind} ready, first synchronised matmul {answer.split()[1]} s",
                  flush=True)
        stalled = False
        for timed, stopped in (("jax", "torch"), ("torch", "jax")):
            for state in ("nothing stopped", "idle", "busy"):
                other = workers[stopped]
                if state == "busy":
                    other.ask("busy", args.deadline)
                if state != "nothing stopped":
                    other.signal(signal.SIGSTOP)
                began = time.monotonic()
                answer = workers[timed].ask("mm", args.deadline)
                waited = time.monotonic() - began
                row: dict[str, object] = {"timed": timed, "stopped": stopped if state !=
                                          "nothing stopped" else "", "its state": state,
                                          "answer": answer, "waited_s": round(waited, 3)}
                if answer is None:
                    stalled = True
                    row["stack"] = workers[timed].stack()
                other.signal(signal.SIGCONT)
                if answer is None:  # the stalled matmul may finish once the other runs again
                    row["after_continue"] = workers[timed].ask("", args.deadline)
                if state == "busy":
                    row["idle_again"] = other.ask("idle", args.deadline)
                results.append(row)
                print("gpu_stop_probe:", json.dumps(row), flush=True)
        print("gpu_stop_probe: " + ("a matmul STALLED while another process was stopped"
                                    if stalled else "no matmul stalled"))
        return 3 if stalled else 0
    finally:
        for worker in workers.values():
            worker.close()


if __name__ == "__main__":
    sys.exit(main())
