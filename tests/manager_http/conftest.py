"""What the secure-port tests share: a kube simulator with the CCM's RBAC and a few
identities, an HTTPS client that trusts exactly one certificate, and the simulator's
review log.

Identities (static tokens, as a token file would give them):
- the CCM's ServiceAccount, bound to `system:auth-delegator` by deploy/base/rbac.yaml; the
  manager makes its reviews with this token, as in a cluster;
- `monitoring/prometheus`, bound to a ClusterRole that may `get` the non-resource URL
  `/metrics` (what a scraper is given);
- `default/stranger`, a ServiceAccount bound to nothing;
- the simulator's admin, in `system:masters`.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.kubeapi.reviews import Reviews, ReviewSettings
from pyccm.manager.access import AccessSettings, Gate
from pyccm.manager.http import Checks, HttpServer
from pyccm.manager.serving import ServingSettings
from pyccm.sim.kube.runtime import write_kubeconfig
from pyccm.sim.kube.settings import User
from pyccm.sim.kube.testing import KubeSimHandle, running_kube_sim

REPO = Path(__file__).resolve().parents[2]
RBAC = REPO / "deploy" / "base" / "rbac.yaml"
PAIR = "cloud-controller-manager"

CCM_USER = "system:serviceaccount:kube-system:cloud-controller-manager"
READER_USER = "system:serviceaccount:monitoring:prometheus"
STRANGER_USER = "system:serviceaccount:default:stranger"
CCM_TOKEN = "ccm-sa-token-4f1c9e2a"
READER_TOKEN = "prometheus-sa-token-8b7d6c5e"
STRANGER_TOKEN = "stranger-sa-token-3a2b1c0d"
GARBAGE_TOKEN = "garbage-token-0000ffff"
# Client certificates (test_client_certificates.py): these users' rights.
CERT_READER = "metrics-scraper"

METRICS_READER = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: pyccm-metrics-reader}}
rules:
  - nonResourceURLs: ["/metrics"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: pyccm-metrics-reader}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: pyccm-metrics-reader}}
subjects:
  - {{kind: ServiceAccount, name: prometheus, namespace: monitoring}}
  - {{kind: User, name: {CERT_READER}}}
"""


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeSimHandle]:
    reader = tmp_path_factory.mktemp("rbac") / "metrics-reader.yaml"
    reader.write_text(METRICS_READER)
    tokens = (
        (CCM_TOKEN, User(CCM_USER)),
        (READER_TOKEN, User(READER_USER)),
        (STRANGER_TOKEN, User(STRANGER_USER)),
    )
    with running_kube_sim(rbac_files=(RBAC, reader), tokens=tokens) as handle:
        yield handle


@pytest.fixture(scope="module")
def ccm_kubeconfig(kube: KubeSimHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig with the CCM ServiceAccount's token (not the admin's)."""
    path = tmp_path_factory.mktemp("ccm") / "kubeconfig"
    write_kubeconfig(path, url=kube.url, token=CCM_TOKEN, user="cloud-controller-manager")
    return path


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def trusting(cafile: Path) -> ssl.SSLContext:
    """A client context that trusts exactly `cafile` and checks the host name."""
    return ssl.create_default_context(cafile=str(cafile))


def fetch(
    port: int,
    path: str,
    *,
    context: ssl.SSLContext,
    token: str | None = None,
    host: str = "127.0.0.1",
) -> Reply:
    """One HTTPS GET, as a scraper sends it."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    connection = http.client.HTTPSConnection(host, port, context=context, timeout=15)
    try:
        connection.request("GET", path, headers=headers)
        answer = connection.getresponse()
        return Reply(answer.status, dict(answer.headers), answer.read())
    finally:
        connection.close()


def peer_certificate(port: int, *, host: str = "127.0.0.1") -> bytes:
    """The DER certificate the server presents (no verification: we compare it)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((host, port), timeout=10) as raw,
        context.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def der_of(pem_file: Path) -> bytes:
    """The first certificate of a PEM file, DER-encoded."""
    return ssl.PEM_cert_to_DER_cert(pem_file.read_text())


def reviews(kube: KubeSimHandle, since: int = 0) -> list[dict[str, Any]]:
    """The simulator's log of TokenReviews and SubjectAccessReviews from record `since`."""
    return [
        record
        for record in kube.requests()
        if record.get("seq", 0) >= since
        and record.get("resource") in ("tokenreviews", "subjectaccessreviews")
    ]


def mark(kube: KubeSimHandle) -> int:
    """The seq the simulator's next logged request gets."""
    return kube.call(lambda sim: sim.request_seq)


def wait_for(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    """Poll `condition` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f}s: {what}")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serving(
    kubeconfig: Path,
    *,
    serving: ServingSettings,
    access: AccessSettings | None = None,
    clock: Callable[[], float] = time.monotonic,
    review: ReviewSettings | None = None,
    checks: Checks | None = None,
) -> Iterator[HttpServer]:
    """The manager's HTTPS server in this process, its reviews made with `kubeconfig`."""
    reviewer = Reviews(
        client=KubeClient(settings=KubeSettings(kubeconfig=str(kubeconfig))), settings=review
    )
    gate = Gate(settings=access or AccessSettings(), reviewer=reviewer, clock=clock)
    server = HttpServer(
        serving=serving,
        checks=checks or Checks(healthz={"leaderElection": lambda: None}, readyz={}),
        gate=gate,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()
        reviewer.close()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
