"""A node's admin socket, relayed from its host to the client's host (issue 34).

The server families set a topology up through each server's local socket, as root (MariaDB's
unix_socket authentication, PostgreSQL's peer): replication users, CHANGE MASTER, status. When the node
runs on another host, its step exposes that socket on the host's own address (`exposed`), and the
client's host makes a socket file of its own (`relayed`, mode 0600 in a 0700 folder) that leads there:
the families' code runs unchanged. A connection to the exposed port must first send the step's token
(32 random bytes, handed to the coordinator on the step's stdout, never on a command line or in a file);
without it, it is closed unanswered. On the server's side the connection comes from the step, which runs
as root.
"""
from __future__ import annotations

import os
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

TOKEN_BYTES = 32
CHUNK = 65536


def _pump(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways between a and b until both sides have ended, then close them."""
    def one_way(src: socket.socket, dst: socket.socket) -> None:
        with suppress(OSError):
            while data := src.recv(CHUNK):
                dst.sendall(data)
        with suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    back = threading.Thread(target=one_way, args=(b, a), daemon=True)
    back.start()
    one_way(a, b)
    back.join()
    a.close()
    b.close()


def _serve(listener: socket.socket, handle) -> None:
    """Accept on listener until it is closed; each connection handled in a thread of its own."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        part = conn.recv(size - len(data))
        if not part:
            break
        data += part
    return data


@contextmanager
def exposed(target: Callable[[], Path], address: str) -> Iterator[tuple[int, bytes]]:
    """target() (a unix socket: the one of the node's server running at the time of each connection, which a
    timed event may have started again) reachable on address:port for whoever sends the token first; yields
    (port, token)."""
    token = secrets.token_bytes(TOKEN_BYTES)
    listener = socket.create_server((address, 0))

    def handle(conn: socket.socket) -> None:
        conn.settimeout(5)
        try:
            if not secrets.compare_digest(_read_exactly(conn, TOKEN_BYTES), token):
                conn.close()
                return
            conn.settimeout(None)
            server = socket.socket(socket.AF_UNIX)
            server.connect(str(target()))
        except OSError:
            conn.close()
            return
        _pump(conn, server)

    threading.Thread(target=_serve, args=(listener, handle), daemon=True).start()
    try:
        yield listener.getsockname()[1], token
    finally:
        _close(listener)


@contextmanager
def relayed(path: Path, address: str, port: int, token: bytes) -> Iterator[Path]:
    """A unix socket at path (its folder: 0700) whose connections lead to an exposed socket at address:port."""
    path.parent.chmod(0o700)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    listener.listen()

    def handle(conn: socket.socket) -> None:
        try:
            remote = socket.create_connection((address, port), timeout=10)
            remote.settimeout(None)
            remote.sendall(token)
        except OSError:
            conn.close()
            return
        _pump(conn, remote)

    threading.Thread(target=_serve, args=(listener, handle), daemon=True).start()
    try:
        yield path
    finally:
        _close(listener)
        path.unlink(missing_ok=True)


def _close(listener: socket.socket) -> None:
    """Close a listener and wake its accept (a close alone does not, on Linux)."""
    with suppress(OSError):
        listener.shutdown(socket.SHUT_RDWR)
    listener.close()
