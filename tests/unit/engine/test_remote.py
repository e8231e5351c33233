"""Workers a launcher starts, joined over an authenticated connection (engine/remote.py, the
worker command engine/remote_worker.py): a connection without the token, with a wrong one,
a replayed handshake or garbage is refused in one line and the listener goes on to accept the
right worker; an external NumPy worker, started by the test in a session of its own (no child
of the pool), answers a real case command; a killed worker, a vanished host and a dropped
connection each fail in one line, leaving no process behind."""

from __future__ import annotations

import json
import logging
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_mlbench import frameworks
from pytest_mlbench.engine import leftovers, remote
from pytest_mlbench.engine import protocol as p
from pytest_mlbench.engine.launcher import WorkerCrashed, WorkerSpec, WorkerTimeout, carrying
from pytest_mlbench.engine.pools import FrameworkPool, PoolKey, Pools, Side
from pytest_mlbench.workloads import catalogue
from pytest_mlbench.workloads.case import CaseId

SUITES = Path(__file__).resolve().parents[3] / "suites"
TOKEN = b"0123456789abcdef" * 4
HELLO = {"rank": 0, "world": 1, "host": "here", "pid": 1, "addr": "127.0.0.1", "port": 1}


def _listener(handshake_s: float = 2.0) -> remote.Listener:
    return remote.Listener(TOKEN, handshake_s=handshake_s)


def _dial(listener: remote.Listener) -> socket.socket:
    sock = socket.create_connection(listener.address, timeout=5)
    return sock


def _recorded_hello(sock: socket.socket, token: bytes) -> bytes:
    """A worker's handshake message, as an eavesdropper would record it off the wire."""
    greeting = sock.recv(len(remote.SERVER_MAGIC) + remote.NONCE, socket.MSG_WAITALL)
    ns, nw = greeting[len(remote.SERVER_MAGIC):], os.urandom(remote.NONCE)
    body = json.dumps(HELLO, sort_keys=True).encode()
    return (remote.WORKER_MAGIC + nw + struct.pack(">H", len(body)) + body
            + (remote._mac(token, b"worker", ns, nw, body) if token else bytes(remote.MAC)))


def _in_background(*clients: Callable[[], Any]) -> threading.Thread:
    def run() -> None:
        for client in clients:
            client()
            time.sleep(0.02)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_every_bad_connection_is_refused_in_one_line_and_the_right_worker_joins(
        caplog: pytest.LogCaptureFixture) -> None:
    listener = _listener(handshake_s=0.5)
    recorded: list[bytes] = []

    def send(payload: Callable[[socket.socket], bytes]) -> Callable[[], None]:
        def client() -> None:
            with _dial(listener) as sock:
                data = payload(sock)
                sock.sendall(data)
                try:
                    sock.recv(100)  # until the listener closes it (or answers)
                except OSError:
                    pass
        return client

    def good() -> None:
        sock = _dial(listener)
        remote.prove(sock, TOKEN, HELLO)
        sock.close()

    def record_a_good_one(sock: socket.socket) -> bytes:
        recorded.append(_recorded_hello(sock, TOKEN))
        return recorded[-1]

    def silent() -> None:
        with _dial(listener):  # its greeting unread, and nothing said
            time.sleep(listener.handshake_s + 0.3)

    clients = [send(lambda s: _recorded_hello(s, b"")),  # no token
               send(lambda s: _recorded_hello(s, b"another session's token")),
               send(lambda s: b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(64)),
               silent]
    caplog.set_level(logging.WARNING, logger="pytest_mlbench.remote")
    thread = _in_background(*clients, good)
    joined = listener.accept(1, timeout=10)
    thread.join(5)
    assert [j.rank for j in joined] == [0] and joined[0].host == "here"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4 and all("\n" not in line for line in lines)
    assert "proved no token" in lines[0]
    assert "does not match this session's token" in lines[1]
    assert "not the pytest-mlbench handshake" in lines[2]
    assert "nothing before its deadline" in lines[3]
    assert all(line.startswith("mlbench: refused a worker connection from 127.0.0.1:")
               for line in lines)
    joined[0].sock.close()

    # a handshake recorded off the wire and replayed on a new connection proves nothing
    caplog.clear()
    thread = _in_background(send(record_a_good_one))
    first = listener.accept(1, timeout=5)
    thread.join(5)
    first[0].sock.close()
    replay = _in_background(send(lambda s: recorded[0]), good)
    again = listener.accept(1, timeout=5)
    replay.join(5)
    assert [r.getMessage() for r in caplog.records][-1].endswith(
        "replayed a handshake (its nonce was used before)")
    again[0].sock.close()
    listener.close()


def test_a_worker_that_holds_another_token_is_told_and_the_missing_rank_named() -> None:
    listener = _listener()
    told: list[str] = []

    def wrong() -> None:
        try:
            remote.prove(_dial(listener), b"a previous session's token", HELLO)
        except remote.Refused as exc:
            told.append(str(exc))

    def other_world() -> None:
        try:
            remote.prove(_dial(listener), TOKEN, {**HELLO, "world": 4})
        except remote.Refused as exc:
            told.append(str(exc))

    thread = _in_background(wrong, other_world,
                            lambda: remote.prove(_dial(listener), TOKEN, {**HELLO, "world": 2}))
    with pytest.raises(WorkerTimeout, match=r"^external worker rank\(s\) \[1\] of 2 did not "
                       r"connect to 127\.0\.0\.1:\d+ within 2 s \(joined: \[0\]\)$"):
        listener.accept(2, timeout=2.0)
    thread.join(5)
    assert told[0].startswith("closed the connection")  # the session says nothing to a stranger
    assert told[1] == ("the session refused this worker: it is a rank of 4 workers, the "
                       "waiting pool has 2")
    assert "refused" in listener.refusals[-1] and len(listener.refusals) == 2
    listener.close()


def test_pools_that_start_together_each_get_their_own_launchers_workers() -> None:
    """A pass starts torch's and JAX's pools at once, both of two ranks: a worker names its
    pool, one that comes while the other pool waits keeps its place (the lobby), and one whose
    pool or world the session does not run is told why."""
    listener = _listener()
    listener.expected = {"torch-w2-n2": 2, "jax-w2-n2": 2}
    told: list[str] = []

    def worker(rank: int, pool: str, world: int = 2) -> Callable[[], None]:
        def client() -> None:
            try:
                remote.prove(_dial(listener), TOKEN,
                             {**HELLO, "rank": rank, "world": world, "pool": pool})
            except remote.Refused as exc:
                told.append(str(exc))
        return client

    thread = _in_background(worker(0, "jax-w2-n2"), worker(0, "torch-w2-n2"),
                            worker(1, "jax-w2-n2"), worker(0, "tf-w2"), worker(0, "", 3),
                            worker(0, "jax-w2-n2"), worker(1, "torch-w2-n2"))
    torch = listener.accept(2, timeout=10, pool="torch-w2-n2")
    thread.join(5)
    assert [(j.rank, j.pool) for j in torch] == [(0, "torch-w2-n2"), (1, "torch-w2-n2")]
    assert sorted((j.rank, j.pool) for j in listener.lobby) == [(0, "jax-w2-n2"),
                                                                (1, "jax-w2-n2")]
    jax = listener.accept(2, timeout=1, pool="jax-w2-n2")  # from the lobby, nothing new
    assert [(j.rank, j.pool) for j in jax] == [(0, "jax-w2-n2"), (1, "jax-w2-n2")]
    assert told == [
        "the session refused this worker: this session runs no pool tf-w2 (its external "
        "pools: jax-w2-n2 (2 workers), torch-w2-n2 (2 workers))",
        "the session refused this worker: it is a rank of 3 workers, the waiting pool has 2",
        "the session refused this worker: rank 0 already joined (from 127.0.0.1:"
        + told[2].split("127.0.0.1:")[1]]
    assert "pid" in told[2] and listener.lobby == []
    for j in torch + jax:
        j.sock.close()
    listener.close()


def test_a_pool_whose_workers_never_came_fails_its_other_cases_at_once() -> None:
    """--mlbench-wait-workers bounds the wait once a pass: every later case of that pool gets
    the same line at once (four cases waited four times before), and the next pass waits
    again."""
    listener = _listener()
    pools = Pools({"torch": frameworks.BUILTIN["torch"]}, 1, "off", external=listener,
                  external_wait_s=0.3, announce=lambda line: None)
    key = PoolKey("torch", 2, nodes=2)
    line = (r"^external worker rank\(s\) \[0, 1\] of 2 \(pool torch-w2-n2\) did not connect to "
            r"127\.0\.0\.1:\d+ within 0 s \(joined: none\)$")
    began = time.monotonic()
    with pytest.raises(WorkerTimeout, match=line):
        pools.running(key, Side(), "")
    waited = time.monotonic() - began
    for _ in range(3):
        with pytest.raises(WorkerTimeout, match=line):
            pools.running(key, Side(), "")
    assert time.monotonic() - began < waited + 0.2 and listener.expected == {"torch-w2-n2": 2}
    pools.close()  # the pass ends
    assert pools.unjoined == {} and listener.expected == {}
    listener.close()


def test_a_worker_serves_no_listener_that_cannot_prove_the_token() -> None:
    """Mutual: something else on the port (a stale session, a hostile listener) that answers
    "ok" without the token's proof gets nothing from the worker but a proof bound to its own
    nonces, useless anywhere else."""
    server = socket.create_server(("127.0.0.1", 0))

    def impostor() -> None:
        sock, _ = server.accept()
        sock.sendall(remote.SERVER_MAGIC + os.urandom(remote.NONCE))
        sock.recv(1 << 16)
        sock.sendall(b"ok" + os.urandom(remote.MAC))
        time.sleep(0.5)
        sock.close()

    thread = _in_background(impostor)
    with pytest.raises(remote.Refused, match="did not prove the token"):
        remote.prove(socket.create_connection(server.getsockname()), TOKEN, HELLO)
    thread.join(5)
    server.close()


class _Forged:
    """A pickle that would create a file in the process that loads it."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def test_an_authenticated_worker_s_forged_reply_is_refused_unrun(tmp_path: Path) -> None:
    """Even a worker holding the token is read through wire.py's restricted unpickler: a
    reply naming anything but the protocol's values fails the pool's start, unrun."""
    from multiprocessing.connection import Connection

    listener = _listener()
    planted = tmp_path / "ran"

    def forger() -> None:
        sock = _dial(listener)
        remote.prove(sock, TOKEN, HELLO)
        conn = Connection(sock.detach())
        conn.recv_bytes()  # the environment
        conn.send_bytes(json.dumps({"pid": 4242}).encode())
        conn.recv_bytes()  # the spec
        import pickle
        conn.send_bytes(pickle.dumps(("ok", _Forged(str(planted)))))
        time.sleep(0.5)
        conn.close()

    thread = _in_background(forger)
    pool = remote.ExternalPool(WorkerSpec("x:y", 1), listener, wait_s=5,
                               announce=lambda line: None)
    with pytest.raises(WorkerCrashed, match=r"worker 0 \(pid 4242\) answered 'start' with what "
                       r"this process cannot read \(Forbidden: the reply names io.open"):
        pool.start()
    pool.close(kill=True)
    thread.join(5)
    assert not planted.exists()
    listener.close()


def test_the_token_file_is_the_owner_s_alone(tmp_path: Path) -> None:
    path = remote.write_token(str(tmp_path / "token"), "secret")
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert remote.read_token(path) == b"secret"
    with pytest.raises(FileExistsError):  # never over an existing file (or a planted link)
        remote.write_token(path, "other")
    os.chmod(path, 0o644)
    with pytest.raises(remote.Refused, match="readable by others .*chmod 600"):
        remote.read_token(path)
    assert remote.read_token("", {remote.TOKEN_VAR: "from-env\n"}) == b"from-env"
    with pytest.raises(remote.Refused, match="no token"):
        remote.read_token("", {})
    assert remote.parse_address(":9000") == ("127.0.0.1", 9000)
    with pytest.raises(ValueError, match="not HOST:PORT"):
        remote.parse_address("host:http")


def test_the_launch_commands_name_the_listener_and_the_token_file() -> None:
    torchrun, srun = remote.launch_commands(("10.0.0.5", 29555), "/shared/tok", world=4, nodes=2)
    assert torchrun == ("torchrun --nnodes=2 --nproc-per-node=2 --node-rank=$NODE_RANK "
                        "--master-addr=$HOST0 --master-port=29400 --no-python python -m "
                        "pytest_mlbench.worker --connect 10.0.0.5:29555 --token-file /shared/tok")
    assert srun == ("srun --nodes=2 --ntasks=4 --ntasks-per-node=2 python -m "
                    "pytest_mlbench.worker --connect 10.0.0.5:29555 --token-file /shared/tok")


# -- an external NumPy worker, started by the test, not by the pool ------------------------------

@pytest.fixture
def session(tmp_path: Path) -> Iterator[tuple[remote.Listener, str, list[subprocess.Popen[bytes]]]]:
    """A listener with its token file, and the workers the test starts, each marked so that
    none may be left behind."""
    mark = uuid.uuid4().hex
    path = remote.write_token(str(tmp_path / "token"), TOKEN.decode())
    listener = remote.Listener(TOKEN, token_file=path)
    started: list[subprocess.Popen[bytes]] = []
    yield listener, mark, started
    listener.close()
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    time.sleep(0.2)
    assert list(carrying("MLBENCH_TEST_REMOTE", mark)) == [], "a worker process was left"
    # an agent killed outright leaves its scratch folder to the next sweep, as a session does
    leftovers.sweep_stale(Path(tempfile.gettempdir()))
    for proc in started:
        assert not list(Path(tempfile.gettempdir()).glob(f"{leftovers.PREFIX}{proc.pid}-*"))


def _worker(session: Any, connect: str = "", *more: str) -> subprocess.Popen[bytes]:
    listener, mark, started = session
    address = connect or "{}:{}".format(*listener.address)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_mlbench.worker", "--connect", address,
         "--token-file", listener.token_file, "--rank", "0", "--world", "1", "--wait", "20",
         *(more or ("--once",))],
        env={**os.environ, "MLBENCH_TEST_REMOTE": mark}, stderr=subprocess.PIPE,
        start_new_session=True)  # launched apart from the session, as a cluster's launcher does
    started.append(proc)
    return proc


def _pool(listener: remote.Listener) -> FrameworkPool:
    pool = FrameworkPool(PoolKey("numpy", 1), frameworks.BUILTIN["numpy"], 1, "off", "",
                         compiler="", external=listener)
    pool.start()
    return pool


def _open_mlp(pool: FrameworkPool) -> int:
    workload = catalogue.load_workload(SUITES / "mlp")
    shape, task = workload.sizes["smoke"][0], workload.all_tasks[0]
    cid = CaseId(workload, shape, task, "numpy", "eager", "cpu", "fp32")
    return pool.open(p.CaseSpec.of(cid, str(SUITES), "smoke", 0))


def test_an_external_worker_answers_a_case_s_commands_and_leaves_when_closed(session: Any) -> None:
    proc = _worker(session)
    pool = _pool(session[0])
    try:
        assert [type(i) for i in pool.info] == [p.WorkerInfo]
        handle = _open_mlp(pool)
        assert [type(r) for r in pool.case(handle, p.Start())] == [p.Started]
        assert [type(r) for r in pool.case(handle, p.Evaluate(0))] == [p.Gradient]
        assert pool.live().pids[0] != proc.pid  # a fresh process, started by the worker's agent
    finally:
        pool.close()
    assert proc.wait(10) == 0


def test_a_launcher_s_worker_serves_each_pool_in_a_fresh_process_until_the_session_ends(
        session: Any) -> None:
    """A campaign's passes each start fresh workers: the launcher's rank stays, and its agent
    connects again for the next pool and starts a new process for it."""
    proc = _worker(session, "", "--linger", "2")
    pids = []
    for _ in range(2):
        pool = _pool(session[0])
        pids.append(pool.live().pids[0])
        pool.close()
    assert pids[0] != pids[1]
    session[0].close()  # the session ends: the agent, waiting for a next pool, leaves
    assert proc.wait(10) == 0


def _killed(session: Any, proc: subprocess.Popen[bytes],
            kill: Callable[[subprocess.Popen[bytes], FrameworkPool], None], expected: str) -> None:
    pool = _pool(session[0])
    try:
        handle = _open_mlp(pool)
        kill(proc, pool)
        began = time.monotonic()
        with pytest.raises(WorkerCrashed) as caught:
            pool.case(handle, p.Start())
        assert time.monotonic() - began < 5
        line = str(caught.value)
        assert "\n" not in line and re.match(expected, line), line
    finally:
        pool.close()
    proc.wait(10)


def _gone(pid: int, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except OSError:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} still runs")


@pytest.mark.parametrize("who", ["its worker", "its whole host"])
def test_a_killed_external_worker_fails_in_one_line_and_leaves_nothing(session: Any,
                                                                      who: str) -> None:
    def kill(proc: subprocess.Popen[bytes], pool: FrameworkPool) -> None:
        # the worker process itself, or the agent (the host's launcher), whose worker then
        # dies with it (PR_SET_PDEATHSIG)
        worker = pool.live().pids[0]
        os.kill(worker if who == "its worker" else proc.pid, signal.SIGKILL)
        _gone(worker)  # dead before the next command, which must then fail

    _killed(session, _worker(session), kill, r"^external worker 0 \(pid \d+ on .+\) closed its connection "
                           r"without answering 'case start': it died or was killed")


class _Cable:
    """A TCP relay between a worker and the listener, to pull out like a network cable."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.target, self.cut = target, threading.Event()
        self.ends: list[socket.socket] = []
        threading.Thread(target=self._relay, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.getsockname()[1]}"

    def _relay(self) -> None:
        a, _ = self.server.accept()
        b = socket.create_connection(self.target)
        self.ends = [a, b]
        while not self.cut.is_set():
            ready, _, _ = select.select([a, b], [], [], 0.05)
            for sock in ready:
                data = sock.recv(1 << 16)
                if not data:
                    self.cut.set()
                    break
                (b if sock is a else a).sendall(data)
        for sock in (a, b):
            sock.close()
        self.server.close()

    def pull(self) -> None:
        self.cut.set()
        time.sleep(0.2)


def test_a_dropped_connection_fails_in_one_line_and_the_worker_kills_its_process(
        session: Any) -> None:
    listener = session[0]
    cable = _Cable(listener.address)
    proc = _worker(session, cable.address)
    _killed(session, proc, lambda proc, pool: cable.pull(),
            r"^external worker 0 \(pid \d+ on .+\) closed its connection without answering "
            r"'case start'")
    assert proc.wait(10) == 1
    said = proc.stderr.read() if proc.stderr else b""
    assert b"the session's connection dropped: its worker (pid" in said
