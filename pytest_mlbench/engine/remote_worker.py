"""The worker a cluster launcher starts: ``python -m pytest_mlbench.worker --connect HOST:PORT
--token-file F`` (pytest_mlbench/worker.py), once per rank on every host.

It takes its rank and world from explicit flags, else from the launcher's environment
(torchrun's RANK / WORLD_SIZE / LOCAL_RANK, SLURM's SLURM_PROCID / SLURM_NTASKS /
SLURM_LOCALID, Open MPI's OMPI_COMM_WORLD_*), connects to the session, proves the session's
token and checks the session proves it back (engine/remote.py). For each pool the session
runs it then starts a fresh worker process (``python -m pytest_mlbench.engine.child``, as a
session starts its own children) on the authenticated connection, with the session's
environment for it, and watches: when the connection drops (the session ended, closed the
pool, or its host or network went away) it kills that process and everything in its process
group at once, and it dies with this agent (PR_SET_PDEATHSIG). After each pool it connects
again for the next one, and leaves when the session no longer answers (``--linger``), or
after one pool with ``--once``.

Every outcome that ends it is one line on stderr: ``mlbench worker rank 1: ...``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path

from pytest_mlbench import owned
from pytest_mlbench.engine import leftovers, remote

ENV_RANKS = (("RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun"),
             ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm"),
             ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
              "mpirun"),
             ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "mpich"))
WATCH_S = 0.1  # how often the agent looks at its process and the connection
DROPPED = getattr(select, "POLLRDHUP", 0) | select.POLLHUP | select.POLLERR


def ranks(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[int, int, int, str]:
    """(rank, world, local rank, where from): flags first, then the first launcher whose
    variables are set."""
    if args.rank is not None and args.world is not None:
        return args.rank, args.world, args.local_rank or 0, "flags"
    for rank, world, local, launcher in ENV_RANKS:
        if rank in environ and world in environ:
            return (int(environ[rank]), int(environ[world]), int(environ.get(local, 0)),
                    launcher)
    raise SystemExit("mlbench worker: no rank: give --rank and --world, or start it under "
                     "torchrun, srun or mpirun (RANK/WORLD_SIZE, SLURM_PROCID/SLURM_NTASKS)")


def free_port(addr: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET) as sock:
        sock.bind((addr, 0))
        return int(sock.getsockname()[1])


def connect(address: tuple[str, int], deadline: float) -> socket.socket | None:
    """A connection to the session, tried until ``deadline`` (the session may not listen
    yet, or be between pools); None when it never answered."""
    while True:
        try:
            sock = socket.create_connection(address, timeout=remote.HANDSHAKE_S)
            remote.keepalive(sock)
            return sock
        except OSError:
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.2)


class Agent:
    """One rank: joins the session and serves its pools, a fresh process each."""

    def __init__(self, args: argparse.Namespace, token: bytes) -> None:
        self.args, self.token = args, token
        self.address = remote.parse_address(args.connect)
        self.rank, self.world, self.local, self.launcher = ranks(args, os.environ)
        self.name = f"mlbench worker rank {self.rank}"

    def say(self, text: str) -> None:
        print(f"{self.name}: {text}", file=sys.stderr, flush=True)

    def hello(self, sock: socket.socket) -> dict[str, object]:
        addr = self.args.advertise or sock.getsockname()[0]
        return {"rank": self.rank, "world": self.world, "local_rank": self.local,
                "host": socket.gethostname(), "pid": os.getpid(), "addr": addr,
                "port": free_port(addr), "launcher": self.launcher, "pool": self.args.pool}

    def run(self) -> int:
        served, code = 0, 0
        while True:
            wait_s = self.args.wait if not served else self.args.linger
            sock = connect(self.address, time.monotonic() + wait_s)
            if sock is None:
                if served:
                    return code
                self.say(f"nothing listens at {self.args.connect} (tried for {wait_s:.0f} s)")
                return 1
            try:
                remote.prove(sock, self.token, functools.partial(self.hello, sock),
                             greeting_s=self.args.wait)
            except (remote.Refused, OSError) as exc:
                sock.close()
                if served:  # the session ended, and something else holds its port now
                    return code
                self.say(f"refused: {exc}")
                return 3
            code = self.serve(sock)
            served += 1
            if self.args.once:
                return code

    def serve(self, sock: socket.socket) -> int:
        """One pool: the session's environment for the process, the process started on the
        connection, watched until it ends or the connection drops."""
        conn = Connection(sock.detach())
        # accepted, it may wait in the session's lobby while another pool starts first
        if not wait([conn], self.args.wait):
            self.say("the session sent nothing after the handshake")
            conn.close()
            return 1
        try:
            told = json.loads(conn.recv_bytes(1 << 20))
        except (EOFError, OSError, ValueError):
            conn.close()
            return 0  # the session closed the connection (its pool was not started)
        # named as a session's folder: one an agent killed outright could not remove is swept
        # by the next agent or session here once its pid is gone (leftovers.sweep_stale)
        scratch = owned.mkdtemp(f"{leftovers.PREFIX}{os.getpid()}-worker-",
                                "a pytest-mlbench worker's folder for one pool")
        try:
            child = self.start(conn.fileno(), told, scratch)
            conn.send_bytes(json.dumps({"pid": child.pid}).encode())
            return self.watch(child, conn)
        finally:
            conn.close()
            owned.discard(scratch)

    def start(self, fd: int, told: Mapping[str, object], scratch: str) -> subprocess.Popen[bytes]:
        theirs = str(told.get("session_tmp") or "")
        env = dict(os.environ)
        for key, value in dict(told.get("env") or {}).items():  # type: ignore[call-overload]
            # the session's folders (compile caches) are on its host: here, under our own
            env[str(key)] = (str(value).replace(theirs, scratch, 1) if theirs else str(value))
        env.update({"TMPDIR": scratch, "PYTHONUNBUFFERED": "1"})
        # torchrun's ranks would look for its agent's store at MASTER_PORT: each pool's process
        # group meets at the rendezvous the session names instead (remote.ExternalPool)
        env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        cores = self.cores(int(str(told.get("cores") or 0)))
        return subprocess.Popen([sys.executable, "-m", "pytest_mlbench.engine.child", str(fd),
                                 str(self.rank), *([",".join(map(str, cores))] if cores else [])],
                                env=env, pass_fds=(fd,), stdin=subprocess.DEVNULL,
                                start_new_session=True)

    def cores(self, share: int) -> list[int]:
        """The ``share`` cores of this host its process may run on (the session says how
        many, as its own layout gives each process): this rank's local slice of the cores
        this agent may use, so that the host's ranks do not share them (a framework sizes
        its thread pool from them: XLA's CPU pool did from all of them). None: any."""
        mine = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if not share or not mine:
            return []
        start = (self.local * share) % len(mine)
        return [mine[(start + i) % len(mine)] for i in range(min(share, len(mine)))]

    def watch(self, child: subprocess.Popen[bytes], conn: Connection) -> int:
        poller = select.poll()
        poller.register(conn.fileno(), DROPPED)
        while child.poll() is None:
            if poller.poll(WATCH_S * 1000):
                self.kill(child)
                self.say(f"the session's connection dropped: its worker (pid {child.pid}) "
                         "was killed")
                return 1
        return child.returncode if child.returncode >= 0 else 1

    @staticmethod
    def kill(child: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(child.pid, signal.SIGKILL)  # it and whatever it started
        except OSError:
            child.kill()
        child.wait()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pytest_mlbench.worker",
                                description="A pytest-mlbench worker that a launcher starts: "
                                "connects to a session and serves its pools.")
    p.add_argument("--connect", required=True, metavar="HOST:PORT",
                   help="the session's --mlbench-listen address")
    p.add_argument("--token-file", default="",
                   help=f"the session's token file (mode 0600); default: ${remote.TOKEN_VAR}")
    p.add_argument("--rank", type=int, help="this rank (default: the launcher's environment)")
    p.add_argument("--world", type=int, help="ranks in all (default: the launcher's)")
    p.add_argument("--local-rank", type=int, help="rank on this host (default: the launcher's)")
    p.add_argument("--pool", default="",
                   help="the session's pool this worker was started for, as its launch command "
                   "names it (torch-w2-n2); default: the first that waits for its world")
    p.add_argument("--advertise", default="",
                   help="this host's address its peers reach (default: the one that reaches "
                   "the session)")
    p.add_argument("--wait", type=float, default=600.0,
                   help="seconds to wait for the session to reach, at first, and for a pool "
                   "to ask for this worker (default 600)")
    p.add_argument("--linger", type=float, default=5.0,
                   help="after a pool, seconds to keep trying while nothing listens (the "
                   "session ended: refused) before leaving (default 5)")
    p.add_argument("--once", action="store_true", help="serve one pool, then leave")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        token = remote.read_token(args.token_file)
    except (remote.Refused, OSError) as exc:
        print(f"mlbench worker: {exc}", file=sys.stderr)
        return 2
    leftovers.sweep_stale(Path(tempfile.gettempdir()))
    return Agent(args, token).run()
