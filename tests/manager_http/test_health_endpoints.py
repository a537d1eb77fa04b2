"""/healthz and /readyz report each check; a silent worker fails /healthz."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from pyccm.manager.http import Checks, HttpServer

state: dict[str, str | None] = {"worker": None}


def worker_check() -> str | None:
    return state["worker"]


@pytest.fixture
def server() -> Iterator[HttpServer]:
    checks = Checks(
        healthz={"leaderElection": lambda: None, "worker-cloud-node": worker_check}, readyz={}
    )
    http = HttpServer(address="127.0.0.1", port=0, checks=checks)
    http.start()
    yield http
    http.stop()


def get(server: HttpServer, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_healthy_checks_answer_ok_and_list_themselves_when_verbose(server: HttpServer) -> None:
    state["worker"] = None
    assert get(server, "/healthz") == (200, "ok\n")
    status, body = get(server, "/healthz?verbose")
    assert status == 200
    assert "[+]worker-cloud-node ok" in body


def test_a_silent_worker_fails_healthz_and_says_why(server: HttpServer) -> None:
    state["worker"] = "silent for 4s"
    status, body = get(server, "/healthz")
    assert status == 500
    assert "[-]worker-cloud-node silent for 4s" in body
    assert "[+]leaderElection ok" in body


def test_metrics_are_served_in_prometheus_text(server: HttpServer) -> None:
    status, body = get(server, "/metrics")
    assert status == 200
    assert "# TYPE" in body
