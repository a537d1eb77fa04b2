"""A small forward proxy for tests: HTTP CONNECT tunnels, as corporate proxies give clients
of an https API, and plain-HTTP requests in absolute form (one per connection), with an
optional `Proxy-Authorization` it requires. It logs every CONNECT or request it is asked
for (the target and the credentials presented), so a test sees which requests went through
it and which went direct."""

from __future__ import annotations

import base64
import socket
import socketserver
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass


@dataclass(frozen=True)
class Connect:
    target: str  # host:port as the client asked
    # user:password of the Proxy-Authorization header ("" without one)
    credentials: str
    answered: int


class ConnectProxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, *, require: str = "") -> None:
        super().__init__(("127.0.0.1", 0), _Tunnel)
        # user:password every CONNECT must present ("": none required)
        self.require = require
        self.seen: list[Connect] = []
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def connects(self) -> list[Connect]:
        with self.lock:
            return list(self.seen)

    def record(self, connect: Connect, *sockets: socket.socket) -> None:
        with self.lock:
            self.seen.append(connect)
            self.sockets.extend(sockets)

    def close_tunnels(self) -> None:
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for sock in sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class _Tunnel(socketserver.StreamRequestHandler):
    server: ConnectProxy

    def handle(self) -> None:
        request = self.rfile.readline(65536).decode("latin-1").split()
        headers: dict[str, str] = {}
        while (line := self.rfile.readline(65536)) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if len(request) != 3:
            self._answer(400, "Bad Request")
            return
        if request[0] != "CONNECT":
            self._forward(request, headers)
            return
        target = request[1]
        credentials = _credentials(headers.get("proxy-authorization", ""))
        if self.server.require and credentials != self.server.require:
            self.server.record(Connect(target, credentials, 407))
            self._answer(407, "Proxy Authentication Required")
            return
        host, _, port = target.rpartition(":")
        try:
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
        except OSError:
            self.server.record(Connect(target, credentials, 502))
            self._answer(502, "Bad Gateway")
            return
        upstream.settimeout(None)
        self.server.record(Connect(target, credentials, 200), upstream, self.connection)
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self.wfile.flush()
        pump = threading.Thread(target=_pump, args=(upstream, self.connection), daemon=True)
        pump.start()
        _pump(self.connection, upstream)
        pump.join()
        upstream.close()

    def _forward(self, request: list[str], headers: dict[str, str]) -> None:
        """A plain-HTTP request in absolute form (`GET http://host:port/path`): sent on in
        origin form on a connection of its own, its answer relayed, both closed after."""
        method, url, version = request
        parts = urllib.parse.urlsplit(url)
        credentials = _credentials(headers.pop("proxy-authorization", ""))
        target = f"{parts.hostname}:{parts.port or 80}"
        if self.server.require and credentials != self.server.require:
            self.server.record(Connect(target, credentials, 407))
            self._answer(407, "Proxy Authentication Required")
            return
        body = self.rfile.read(int(headers.get("content-length", "0") or 0))
        headers["connection"] = "close"
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        head = f"{method} {path or '/'} {version}\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in headers.items()
        )
        try:
            upstream = socket.create_connection((parts.hostname or "", parts.port or 80), 10)
        except OSError:
            self.server.record(Connect(target, credentials, 502))
            self._answer(502, "Bad Gateway")
            return
        self.server.record(Connect(target, credentials, 200))
        with upstream:
            upstream.sendall(head.encode("latin-1") + b"\r\n" + body)
            while data := upstream.recv(65536):
                self.wfile.write(data)
        self.wfile.flush()

    def _answer(self, code: int, reason: str) -> None:
        self.wfile.write(f"HTTP/1.1 {code} {reason}\r\nContent-Length: 0\r\n\r\n".encode())
        self.wfile.flush()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy until either side ends, then end the other's writing half."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    with suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _credentials(header: str) -> str:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return ""
    return base64.b64decode(value).decode()


@contextmanager
def connect_proxy(*, require: str = "") -> Iterator[ConnectProxy]:
    """A proxy on 127.0.0.1 (an ephemeral port) for the block."""
    proxy = ConnectProxy(require=require)
    thread = threading.Thread(target=proxy.serve_forever, name="connect-proxy", daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.close_tunnels()
        proxy.server_close()
        thread.join(timeout=10)
