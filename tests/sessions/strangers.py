"""Three strangers knock on a session's worker port (tests/sessions/test_parallel_cases.py):
one with no token, one with another session's token, one sending an HTTP request, at once.
Each waits until the port answers, then reads until the session closes the connection.

    python tests/sessions/strangers.py PORT
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import threading
import time

from pytest_mlbench.engine import remote

HELLO = {"rank": 0, "world": 2, "host": "stranger", "pid": os.getpid(), "addr": "127.0.0.1",
         "port": 1, "pool": ""}


def knock(port: int, send: bytes | None, token: bytes = b"") -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=120)
            break
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
    with sock:
        if send is None:  # a handshake proved with ``token`` (empty: no proof at all)
            greeting = sock.recv(len(remote.SERVER_MAGIC) + remote.NONCE, socket.MSG_WAITALL)
            ns, nw = greeting[len(remote.SERVER_MAGIC):], os.urandom(remote.NONCE)
            body = json.dumps(HELLO, sort_keys=True).encode()
            send = (remote.WORKER_MAGIC + nw + struct.pack(">H", len(body)) + body
                    + (remote._mac(token, b"worker", ns, nw, body) if token
                       else bytes(remote.MAC)))
        try:
            sock.sendall(send)
            while sock.recv(4096):
                pass
        except OSError:
            pass


def main() -> None:
    """All three at once, as the port opens: in the listener's backlog before the workers."""
    port = int(sys.argv[1])
    knocks = [threading.Thread(target=knock, args=args) for args in (
        (port, None), (port, None, b"another session's token"),
        (port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"))]
    for thread in knocks:
        thread.start()
    for thread in knocks:
        thread.join()


if __name__ == "__main__":
    main()
