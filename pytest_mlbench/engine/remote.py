"""Workers that a cluster launcher starts, on this host or another, joined to the session over
an authenticated TCP connection (issue 48).

The session listens on one address (loopback unless told otherwise) and holds a secret
token made for it alone (``new_token``; written with mode 0600 by ``write_token``, read by the
worker from that file or from MLBENCH_TOKEN). A worker (``python -m pytest_mlbench.worker``,
engine/remote_worker.py) connects and proves it holds the token before the session reads a
single byte of anything but the handshake, and the session proves it back:

    session -> worker   SERVER_MAGIC, a fresh 32-byte nonce Ns
    worker  -> session  WORKER_MAGIC, its own nonce Nw, a hello (JSON: rank, world, host,
                        pid, an address and a free port for the rendezvous), and
                        HMAC-SHA256(token, "worker" Ns Nw hello)
    session -> worker   b"ok" HMAC-SHA256(token, "session" Nw Ns hello), or b"no" and why

The MAC is compared in constant time (hmac.compare_digest); Ns is new for every connection,
so a recorded handshake replayed on another connection proves nothing, and a worker nonce
seen before is refused as a replay. Only after that does the connection carry the launcher's
framing (multiprocessing.connection): the session sends the worker's environment (JSON) and
its WorkerSpec, and reads every reply through wire.py's restricted unpickler, as it reads
its own children's. A connection that fails any of this is closed and logged in one line, and
the listener goes on waiting for the right workers.

``ExternalPool`` is a launcher.Pool whose workers are the ones that connect: it prints the
commands to run, waits a bounded time for every rank and fails naming the missing ones, and
reports a worker that dies, a host that goes away or a connection that drops as one line
naming the rank and its host. It cannot stop (SIGSTOP) or ask for the stack of a process on
another host: its pause is a no-op and its timeouts carry no stack.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import secrets
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from typing import Any

from pytest_mlbench.engine import leftovers
from pytest_mlbench.engine.launcher import Pool, WorkerCrashed, WorkerSpec, WorkerTimeout

__all__ = ["ExternalPool", "Joined", "Listener", "Refused", "TOKEN_VAR", "launch_commands",
           "new_token", "parse_address", "read_token", "write_token"]

TOKEN_VAR = "MLBENCH_TOKEN"  # the token itself, for launchers that pass secrets by environment
SERVER_MAGIC = b"mlbench-session/1\n"
WORKER_MAGIC = b"mlbench-worker/1\n"
NONCE = 32
MAC = 32
MAX_HELLO = 4096
HANDSHAKE_S = 5.0  # a connection gets this long to prove the token; the listener then moves on
AGENT_REPLY_S = 30.0  # a worker's agent gets this long to start its fresh process
KEEPALIVE = (10, 5, 3)  # idle s, interval s, probes: a silent dead peer is seen in ~25 s
log = logging.getLogger("pytest_mlbench.remote")


class Refused(ConnectionError):
    """A connection that did not prove the session's token (or a session that refused us)."""


# -- the token ---------------------------------------------------------------------------------

def new_token() -> str:
    return secrets.token_hex(32)


def write_token(path: str, token: str) -> str:
    """``token`` into a new file readable by its owner only (mode 0600, never an existing
    file or a symlink); returns the path."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return path


def read_token(path: str = "", environ: Mapping[str, str] = os.environ) -> bytes:
    """The token from ``path`` (refused when others may read it) or else MLBENCH_TOKEN."""
    if path:
        mode = os.stat(path).st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise Refused(f"token file {path} is readable by others (mode "
                          f"{stat.S_IMODE(mode):o}): chmod 600 {path}")
        with open(path) as f:
            token = f.read().strip()
    else:
        token = environ.get(TOKEN_VAR, "").strip()
    if not token:
        raise Refused(f"no token: give --token-file, or the session's token in {TOKEN_VAR}")
    return token.encode()


def _mac(token: bytes, label: bytes, *parts: bytes) -> bytes:
    return hmac.new(token, label + b"\0" + b"".join(parts), "sha256").digest()


def parse_address(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` -> (host, port); a ValueError says what was wrong."""
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT (a port from 0 to 65535)")
    return host.strip("[]") or default_host, int(port)


def keepalive(sock: socket.socket) -> None:
    """TCP keep-alive probes, so that a peer whose host or network vanished without a word is
    noticed (an error on the socket) within half a minute, not at a command's timeout."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in zip(("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT"), KEEPALIVE,
                           strict=True):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def _read(sock: socket.socket, n: int, deadline: float) -> bytes:
    data = b""
    while len(data) < n:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            chunk = sock.recv(n - len(data))
        except TimeoutError:
            raise Refused(f"sent {len(data)} bytes of the handshake, then nothing before "
                          "its deadline") from None
        if not chunk:
            raise Refused(f"closed the connection after {len(data)} bytes, before proving "
                          "the session's token")
        data += chunk
    return data


# -- the worker's side of the handshake ----------------------------------------------------------

def prove(sock: socket.socket, token: bytes,
          hello: Mapping[str, Any] | Callable[[], Mapping[str, Any]],
          timeout: float = HANDSHAKE_S, greeting_s: float = HANDSHAKE_S) -> None:
    """The worker's half of the handshake on a connected ``sock``: returns once the session
    has proved it holds the same token; raises Refused with the session's reason otherwise.
    The session greets a connection only when a pool waits for workers (until then it waits
    in the listener's backlog): ``greeting_s`` bounds that wait, ``timeout`` the rest.
    ``hello`` may be a function, called once greeted (its free port is fresh then)."""
    try:
        greeting = _read(sock, len(SERVER_MAGIC) + NONCE, time.monotonic() + greeting_s)
    except Refused:
        raise Refused(f"the session did not ask for this worker within {greeting_s:.0f} s "
                      "(it ended, or no pool of its waited)") from None
    deadline = time.monotonic() + timeout
    if callable(hello):
        hello = hello()
    if not greeting.startswith(SERVER_MAGIC):
        raise Refused("the address answered, but not as a pytest-mlbench session")
    ns, nw = greeting[len(SERVER_MAGIC):], secrets.token_bytes(NONCE)
    body = json.dumps(dict(hello), sort_keys=True).encode()
    sock.sendall(WORKER_MAGIC + nw + struct.pack(">H", len(body)) + body
                 + _mac(token, b"worker", ns, nw, body))
    verdict = _read(sock, 2, deadline)
    if verdict == b"no":
        sock.settimeout(1.0)
        why = sock.recv(300).decode("utf8", "replace").strip()
        raise Refused(f"the session refused this worker: {why}")
    if verdict != b"ok" or not hmac.compare_digest(
            _read(sock, MAC, deadline), _mac(token, b"session", nw, ns, body)):
        raise Refused("the session did not prove the token: another session listens there")
    sock.settimeout(None)


# -- the session's side ------------------------------------------------------------------------

@dataclass
class Joined:
    """One authenticated worker: its rank and what its hello said."""

    sock: socket.socket
    rank: int
    world: int
    host: str
    pid: int
    addr: str  # an address of its host its peers can reach (the rendezvous, for rank 0)
    port: int  # a port free on that host when it joined
    peer: str  # where the connection came from
    pool: str = ""  # the pool it was started for (``--pool``); "": any of its world

    def fits(self, pool: str, world: int) -> bool:
        return self.world == world and self.pool in ("", pool)


class Listener:
    """The session's listening socket and its token; ``accept`` waits for one pool's ranks.

    Several pools may wait at once (a pass starts every framework's), each for workers of its
    own launcher: a worker names its pool (``--pool``, in its hello) or joins the first that
    waits for its world. An authenticated worker of another pool the session will run
    (``expected``) waits in the lobby until that pool asks; one that fits no pool is told
    why and refused."""

    def __init__(self, token: bytes, address: tuple[str, int] = ("127.0.0.1", 0), *,
                 handshake_s: float = HANDSHAKE_S, token_file: str = "") -> None:
        self.token, self.handshake_s, self.token_file = token, handshake_s, token_file
        self.refusals: list[str] = []
        self._seen: set[bytes] = set()  # worker nonces of accepted handshakes (replays)
        self.expected: dict[str, int] = {}  # pool name -> its world: the pools still to come
        self.lobby: list[Joined] = []  # authenticated workers of a pool that does not wait yet
        self.say: Callable[[str], None] = log.warning  # where a refusal's line goes
        self._lock = threading.Lock()  # one pool accepts at a time; the others' wait in lobby
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(address)
        self.sock.listen(64)

    @classmethod
    def for_session(cls, address: tuple[str, int] = ("127.0.0.1", 0),
                    environ: Mapping[str, str] = os.environ) -> Listener:
        """A listener with the token the launcher shares (MLBENCH_TOKEN, as a cluster job
        script exports it to the session and the workers alike), else a fresh one written
        0600 into the session's temporary folder (removed with it as the session ends)."""
        shared = environ.get(TOKEN_VAR, "").strip()
        if shared:
            return cls(shared.encode(), address)
        token = new_token()
        path = write_token(os.path.join(leftovers.session_tmp(), "worker-token"), token)
        return cls(token.encode(), address, token_file=path)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return str(host), int(port)

    def close(self) -> None:
        self.forget()
        self.sock.close()

    def forget(self) -> None:
        """No pool is to come (a pass ended): the lobby's workers are let go (they connect
        again for the next pool)."""
        self.expected = {}
        for j in self.lobby:
            j.sock.close()
        self.lobby = []

    def refuse(self, peer: str, why: str) -> None:
        line = f"mlbench: refused a worker connection from {peer}: {why}"
        self.refusals.append(line)
        self.say(line)

    def accept(self, world: int, timeout: float, pool: str = "") -> list[Joined]:
        """Ranks 0..world-1 of ``pool``, each authenticated, in rank order; WorkerTimeout
        naming the ranks that did not come within ``timeout`` (those that did are closed)."""
        deadline = time.monotonic() + timeout
        if not self._lock.acquire(timeout=timeout):
            raise WorkerTimeout(f"external workers of {pool or 'a pool'}: another pool waited "
                                f"for its own for all of {timeout:.0f} s")
        try:
            return self._accept(world, deadline, timeout, pool)
        finally:
            self._lock.release()

    def _accept(self, world: int, deadline: float, timeout: float, pool: str) -> list[Joined]:
        joined: dict[int, Joined] = {}
        for j in list(self.lobby):  # those that came while another pool waited
            if j.fits(pool, world) and j.rank not in joined:
                self.lobby.remove(j)
                joined[j.rank] = j
        while len(joined) < world:
            left = deadline - time.monotonic()
            self.sock.settimeout(max(left, 0.001))
            try:
                if left <= 0:
                    raise TimeoutError
                sock, peer_address = self.sock.accept()
            except TimeoutError:
                for j in joined.values():
                    j.sock.close()
                missing = [r for r in range(world) if r not in joined]
                named = f" (pool {pool})" if pool else ""
                raise WorkerTimeout(f"external worker rank(s) {missing} of {world}{named} did "
                                    f"not connect to {self._where()} within {timeout:.0f} s "
                                    f"(joined: {sorted(joined) or 'none'})") from None
            peer = f"{peer_address[0]}:{peer_address[1]}"
            found = self._handshake(sock, peer, pool, world, joined)
            if found is None:
                continue
            if found.fits(pool, world) and found.rank not in joined:
                joined[found.rank] = found
            else:
                self.lobby.append(found)
        return [joined[r] for r in range(world)]

    def _where(self) -> str:
        host, port = self.address
        return f"{host}:{port}"

    def _handshake(self, sock: socket.socket, peer: str, pool: str, world: int,
                   joined: Mapping[int, Joined]) -> Joined | None:
        try:
            found = self._authenticate(sock, peer, pool, world, joined)
        except (Refused, OSError) as exc:
            self.refuse(peer, str(exc) or type(exc).__name__)
            sock.close()
            return None
        sock.settimeout(None)
        keepalive(sock)
        return found

    def _authenticate(self, sock: socket.socket, peer: str, pool: str, world: int,
                      joined: Mapping[int, Joined]) -> Joined:
        deadline = time.monotonic() + self.handshake_s
        ns = secrets.token_bytes(NONCE)
        sock.sendall(SERVER_MAGIC + ns)
        head = _read(sock, len(WORKER_MAGIC), deadline)
        if head != WORKER_MAGIC:
            raise Refused(f"sent {head[:16]!r}..., which is not the pytest-mlbench handshake "
                          "(garbage, or another protocol)")
        nw = _read(sock, NONCE, deadline)
        size = struct.unpack(">H", _read(sock, 2, deadline))[0]
        if size > MAX_HELLO:
            raise Refused(f"announced a hello of {size} bytes (at most {MAX_HELLO})")
        body = _read(sock, size, deadline)
        mac = _read(sock, MAC, deadline)
        if nw in self._seen:
            raise Refused("replayed a handshake (its nonce was used before)")
        if not any(mac):
            raise Refused("proved no token (its proof is empty)")
        if not hmac.compare_digest(mac, _mac(self.token, b"worker", ns, nw, body)):
            raise Refused("its proof does not match this session's token (a wrong token, "
                          "another session's worker, or a replayed handshake)")
        self._seen.add(nw)
        hello = self._hello(sock, body, pool, world, joined)
        sock.sendall(b"ok" + _mac(self.token, b"session", nw, ns, body))
        return Joined(sock, int(hello["rank"]), int(hello["world"]), str(hello.get("host", "?")),
                      int(hello.get("pid", 0)), str(hello.get("addr", "")),
                      int(hello.get("port", 0)), peer, str(hello.get("pool") or ""))

    def _hello(self, sock: socket.socket, body: bytes, pool: str, world: int,
               joined: Mapping[int, Joined]) -> dict[str, Any]:
        """An authenticated worker's hello (JSON, never a pickle), checked against the pool
        that waits and the pools to come; a mismatch is told to the worker as well as
        logged."""
        try:
            hello = json.loads(body)
            rank, theirs, named = int(hello["rank"]), int(hello["world"]), hello.get("pool") or ""
        except (ValueError, KeyError, TypeError, AttributeError):
            raise Refused("authenticated, but its hello is not rank and world in JSON") from None
        why = self._misfit(str(named), rank, theirs, pool, world, joined)
        if why:
            sock.sendall(b"no" + why.encode()[:290])
            raise Refused(f"authenticated, but {why}")
        return dict(hello)

    def _misfit(self, named: str, rank: int, theirs: int, pool: str, world: int,
                joined: Mapping[int, Joined]) -> str:
        """Why a worker of pool ``named`` ("": any), rank ``rank`` of ``theirs``, fits
        neither the pool that waits (``pool``, ``world`` ranks) nor a pool to come; "" when
        it fits one with its rank still free."""
        others = {n: w for n, w in self.expected.items() if n != pool}
        if named and named != pool and named not in others:
            runs = {**others, **({pool: world} if pool else {})}
            listed = ", ".join(f"{n} ({w} workers)" for n, w in sorted(runs.items()))
            return f"this session runs no pool {named} (its external pools: {listed or 'none'})"
        here = theirs == world and named in ("", pool)
        later = sum(1 for n, w in others.items() if w == theirs and named in ("", n))
        if not here and not later:
            which = f"{named} has {others.get(named, world)}" if named else (
                f"the waiting pool has {world}")
            return f"it is a rank of {theirs} workers, {which}"
        if not 0 <= rank < theirs:
            return f"rank {rank} is outside 0..{theirs - 1}"
        # a rank that came already: refused unless another pool of its world may take it
        held = [j for j in self.lobby if j.rank == rank and j.world == theirs and j.pool == named]
        if here and rank in joined:
            held.append(joined[rank])
        if len(held) >= here + later:
            return f"rank {rank} already joined (from {held[0].peer}, pid {held[0].pid})"
        return ""


# -- a pool of connected workers -------------------------------------------------------------

def launch_commands(address: tuple[str, int], token_file: str, world: int,
                    nodes: int = 1, pool: str = "") -> list[str]:
    """What to run for a pool of ``world`` ranks on ``nodes`` hosts: torchrun's form (once on
    every host, NODE_RANK its index) and SLURM's (once). Without a token file the workers
    read the token from MLBENCH_TOKEN; a listener on every interface is reached by this
    host's name."""
    per = max(world // max(nodes, 1), 1)
    host = socket.gethostname() if address[0] in ("0.0.0.0", "::", "") else address[0]
    worker = f"-m pytest_mlbench.worker --connect {host}:{address[1]}" + (
        f" --token-file {token_file}" if token_file else "") + (f" --pool {pool}" if pool else "")
    return [f"torchrun --nnodes={nodes} --nproc-per-node={per} --node-rank=$NODE_RANK "
            f"--master-addr=$HOST0 --master-port=29400 --no-python python {worker}",
            f"srun --nodes={nodes} --ntasks={world} --ntasks-per-node={per} python {worker}"]


@dataclass(frozen=True)
class RemoteProcess:
    """Where an external rank runs: for messages only (it is no process of this host)."""

    rank: int
    pid: int
    host: str


class ExternalPool(Pool):
    """A launcher.Pool whose ranks are workers a launcher started and that connected to
    ``listener``; every command, reply and check is the parent's own (launcher.Pool)."""

    def __init__(self, spec: WorkerSpec, listener: Listener, *, wait_s: float = 120.0,
                 nodes: int = 1, name: str = "",
                 announce: Callable[[str], None] | None = None, **kwargs: Any) -> None:
        super().__init__(spec, **kwargs)
        self.listener, self.wait_s, self.nodes = listener, wait_s, nodes
        self.announce = announce or log.warning
        self.name = name
        self.hosts: list[str] = []

    def spawn(self) -> None:
        commands = launch_commands(self.listener.address, self.listener.token_file,
                                   self.spec.world, self.nodes, self.name)
        self.announce(f"mlbench: waiting {self.wait_s:.0f} s for {self.spec.world} external "
                      f"worker(s) of {self.name or self.spec.target} on {self.nodes} host(s); "
                      f"run on each host: {commands[0]}  (or under SLURM: {commands[1]})")
        joined = self.listener.accept(self.spec.world, self.wait_s, self.name)
        spec = self._rendezvous(joined)
        try:
            for j in joined:
                self._hand_over(j, spec)
        except BaseException:
            for j in joined[len(self._conns):]:
                j.sock.close()
            raise

    def _rendezvous(self, joined: Sequence[Joined]) -> WorkerSpec:
        """The job's rendezvous (torch's store, jax.distributed's coordinator) on rank 0's
        host, at the port it found free there: the session's own 127.0.0.1 means nothing
        to a rank on another host."""
        dp = self.spec.config.get("dp")
        if not dp:
            return self.spec
        first = joined[0]
        config = {**self.spec.config, "dp": {**dp, "master_addr": first.addr or "127.0.0.1",
                                             "master_port": first.port}}
        env = dict(self.spec.env)
        if not first.addr.startswith("127."):  # gloo's interface is the host's to choose
            env.pop("GLOO_SOCKET_IFNAME", None)
        return replace(self.spec, config=config, env=env)

    def _hand_over(self, j: Joined, spec: WorkerSpec) -> None:
        """The worker's agent gets the environment (JSON) and starts a fresh process on the
        connection, which then reads its spec as a child of this host would."""
        import pickle

        conn = Connection(j.sock.detach())
        self._conns.append(conn)
        self._procs.append(RemoteProcess(j.rank, j.pid, j.host))  # type: ignore[arg-type]
        self.hosts.append(j.host)
        # how many cores the rank's process gets (as the session's own layout gives each
        # process here): its agent picks them from its own host's (cores are a host's own)
        share = len(spec.cores[j.rank]) if j.rank < len(spec.cores) else 0
        conn.send_bytes(json.dumps({"env": dict(spec.env), "cores": share,
                                    "session_tmp": leftovers.session_tmp()}).encode())
        if not wait([conn], AGENT_REPLY_S):
            raise WorkerTimeout(f"external worker {j.rank} (pid {j.pid} on {j.host}) did not "
                                f"start its process within {AGENT_REPLY_S:.0f} s")
        try:
            started = json.loads(conn.recv_bytes(4096))
        except (EOFError, OSError, ValueError):
            raise WorkerCrashed(self.died(j.rank, "start")) from None
        self._procs[-1] = RemoteProcess(j.rank, int(started.get("pid", j.pid)), j.host)  # type: ignore[call-overload]
        conn.send_bytes(pickle.dumps(spec))

    def died(self, rank: int, command: str) -> str:
        proc: RemoteProcess = self._procs[rank]  # type: ignore[assignment]
        return (f"external worker {rank} (pid {proc.pid} on {proc.host}) closed its connection "
                f"without answering {command!r}: it died or was killed, or its host or the "
                "network went away (its stderr is in its launcher's log)")

    def pause(self) -> None:
        """A process on another host cannot be stopped from here: nothing to do."""

    def resume(self) -> None:
        self.paused = False

    def stack(self, rank: int) -> str:
        return ""

    def close(self, kill: bool = False) -> None:
        """Ask every rank to stop, give them the grace to leave (each connection then reads as
        closed), and close the connections: a worker's agent kills its process the moment
        its connection closes, so nothing of theirs outlives this."""
        for conn in self._conns:
            try:
                conn.send(("stop", None))
            except (BrokenPipeError, OSError):
                pass
        deadline = time.monotonic() + (0.0 if self._failed or kill else self.stop_grace)
        for conn in self._conns:
            try:
                while wait([conn], max(deadline - time.monotonic(), 0.0)):
                    conn.recv_bytes()
            except (EOFError, OSError):
                pass
        for conn in self._conns:
            conn.close()
        self._procs, self._conns, self._tails, self.paused = [], [], [], False
