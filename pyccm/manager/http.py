"""/healthz, /livez, /readyz and /metrics for the manager, over HTTPS.

Authentication and authorization as upstream: docs/operator-guide.md#metrics.

`/healthz` (and `/livez`, the same checks, as upstream) runs the leader-election watchdog and
one check per expected worker, which fails when that worker has been silent for three
heartbeats (better than upstream's always-passing pings). `/readyz` says whether this replica
can do its job now: caches synced and every expected worker connected (a standby is ready
when it is healthy). `/metrics` is one scrape for the whole process tree: with
`PROMETHEUS_MULTIPROC_DIR` set (supervisord sets it for every process) it aggregates every
process's metrics; in split mode it adds each worker's last report over the bus, labelled
`worker` (pyccm/exposition.py). `?verbose` lists every check, as upstream.

Every request passes the access gate first (access.py): the probes' paths are open, the
rest needs a token or client certificate the API server vouches for. A refusal is a
`kind: Status` body with the bare reason (`Unauthorized`, `Forbidden`): never the token,
never the review's own words. The TLS handshake runs on the connection's own thread with a
deadline, so a client that connects and stalls holds up no one else.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import mark_process_dead

from pyccm import exposition
from pyccm.manager.access import Gate, Verdict
from pyccm.manager.serving import ServingSettings, server_context

log = logging.getLogger(__name__)

Check = Callable[[], str | None]  # None when healthy, else why not


@dataclass(frozen=True)
class Checks:
    healthz: dict[str, Check]
    readyz: dict[str, Check]


def forget_dead_processes(directory: str) -> None:
    """Drop the live gauges of processes that are gone (a worker killed and restarted by
    supervisord has a new pid; its old gauge files would otherwise be summed forever)."""
    for path in Path(directory).glob("gauge_live*_*.db"):
        pid = int(path.stem.rsplit("_", 1)[1])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
        except PermissionError:
            continue


def render(checks: dict[str, Check], *, verbose: bool) -> tuple[int, str]:
    results = {name: check() for name, check in checks.items()}
    failed = {name: why for name, why in results.items() if why is not None}
    lines = [
        f"[{'-' if name in failed else '+'}]{name} {failed.get(name) or 'ok'}" for name in results
    ]
    status = 500 if failed else 200
    summary = "healthz check failed" if failed else "ok"
    body = "\n".join([*lines, summary]) if (verbose or failed) else summary
    return status, body + "\n"


_HEALTH_PATHS = ("/healthz", "/livez", "/readyz")


def status_body(verdict: Verdict) -> bytes:
    """upstream's `kind: Status` for a refused request, with nothing but the reason."""
    reason = {
        Verdict.UNAUTHORIZED: "Unauthorized",
        Verdict.FORBIDDEN: "Forbidden",
        Verdict.FAILED: "InternalError",
    }[verdict]
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": reason,
            "reason": reason,
            "code": verdict.value,
        }
    ).encode()


class _TlsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        context: ssl.SSLContext,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        # The handshake is left to each connection's thread (Handler.setup): done here, in
        # accept(), one stalled client would block every other.
        self.socket = context.wrap_socket(
            self.socket, server_side=True, do_handshake_on_connect=False
        )

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A failed handshake (a plain-http client, a port scan) is the client's problem.
        log.debug("connection from %s failed", client_address, exc_info=True)


class HttpServer:
    def __init__(
        self,
        *,
        serving: ServingSettings,
        checks: Checks,
        gate: Gate,
        context: ssl.SSLContext | None = None,
        worker_metrics: Callable[[], dict[str, str]] = dict,
    ) -> None:
        registry = exposition.local_registry()

        class Handler(BaseHTTPRequestHandler):
            # Seconds a connection may take for its handshake and each read.
            timeout = 10

            def setup(self) -> None:
                super().setup()
                self.request.do_handshake()

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                verdict = gate.decide(
                    path=url.path,
                    verb="get",
                    authorization=self.headers.get("Authorization", ""),
                    certificate=self.request.getpeercert(),
                )
                if verdict is not Verdict.ALLOWED:
                    self._send(verdict.value, status_body(verdict), "application/json")
                    return
                verbose = "verbose" in parse_qs(url.query, keep_blank_values=True)
                if url.path == "/metrics":
                    if directory := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
                        forget_dead_processes(directory)
                    page = exposition.merge(exposition.render(registry), worker_metrics())
                    self._send(200, page, CONTENT_TYPE_LATEST)
                elif url.path in _HEALTH_PATHS:
                    table = checks.readyz if url.path == "/readyz" else checks.healthz
                    status, body = render(table, verbose=verbose)
                    self._send(status, body.encode(), "text/plain; charset=utf-8")
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Content-Type-Options", "nosniff")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # probes every few seconds would drown the log

        context = context or server_context(serving)
        self._server = _TlsServer((serving.bind_address, serving.port), Handler, context)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)

    def start(self) -> None:
        self._thread.start()
        log.info("serving securely on %s:%d", *self._server.server_address[:2])

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
