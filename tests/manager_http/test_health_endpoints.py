"""/healthz, /livez and /readyz report each check; a silent worker fails /healthz."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pyccm.manager.http import Checks
from pyccm.manager.serving import ServingSettings
from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.https import PAIR, fetch, serving, trusting

state: dict[str, str | None] = {"worker": None}


def worker_check() -> str | None:
    return state["worker"]


@dataclass(frozen=True)
class Served:
    port: int
    cert: Path


@pytest.fixture
def server(ccm_kubeconfig: Path, tmp_path: Path) -> Iterator[Served]:
    checks = Checks(
        healthz={"leaderElection": lambda: None, "worker-cloud-node": worker_check},
        readyz={"informer-sync": lambda: None},
    )
    settings = ServingSettings(port=0, cert_dir=str(tmp_path))
    with serving(ccm_kubeconfig, serving=settings, checks=checks) as http:
        yield Served(http.port, tmp_path / f"{PAIR}.crt")


def get(server: Served, path: str, token: str | None = None) -> tuple[int, str]:
    reply = fetch(server.port, path, context=trusting(server.cert), token=token)
    return reply.status, reply.body.decode()


@pytest.mark.parametrize("path", ["/healthz", "/livez"])
def test_healthy_checks_answer_ok_and_list_themselves_when_verbose(
    server: Served, path: str
) -> None:
    state["worker"] = None
    assert get(server, path) == (200, "ok\n")
    status, body = get(server, f"{path}?verbose")
    assert status == 200
    assert "[+]worker-cloud-node ok" in body


@pytest.mark.parametrize("path", ["/healthz", "/livez"])
def test_a_silent_worker_fails_healthz_and_livez_and_says_why(server: Served, path: str) -> None:
    state["worker"] = "silent for 4s"
    status, body = get(server, path)
    assert status == 500
    assert "[-]worker-cloud-node silent for 4s" in body
    assert "[+]leaderElection ok" in body


def test_readyz_runs_its_own_checks(server: Served) -> None:
    status, body = get(server, "/readyz?verbose")
    assert status == 200
    assert "[+]informer-sync ok" in body


def test_metrics_are_served_in_prometheus_text(server: Served, kube: KubeSimHandle) -> None:
    status, body = get(server, "/metrics", token=kube.token)
    assert status == 200
    assert "# TYPE" in body
