"""/healthz, /readyz and /metrics for the manager (SPEC "http").

`/healthz` runs the leader-election watchdog and one check per expected worker, which
fails when that worker has been silent for three heartbeats (better than upstream's
always-passing pings). `/readyz` says whether this replica can do its job now: caches
synced and every expected worker connected (a standby is ready when it is healthy).
`/metrics` is one scrape for the whole process tree: with `PROMETHEUS_MULTIPROC_DIR` set
(supervisord sets it for every process) it aggregates every process's metrics.
`?verbose` lists every check, as upstream.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

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


def metrics_registry() -> CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return registry
    return REGISTRY


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


class HttpServer:
    def __init__(self, *, address: str, port: int, checks: Checks) -> None:
        registry = metrics_registry()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                verbose = "verbose" in parse_qs(url.query, keep_blank_values=True)
                if url.path == "/metrics":
                    if directory := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
                        forget_dead_processes(directory)
                    self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
                elif url.path in ("/healthz", "/readyz"):
                    table = checks.healthz if url.path == "/healthz" else checks.readyz
                    status, body = render(table, verbose=verbose)
                    self._send(status, body.encode(), "text/plain; charset=utf-8")
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # probes every few seconds would drown the log

        self._server = ThreadingHTTPServer((address, port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
