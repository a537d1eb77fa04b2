"""The manager's secure port as the tests see it: identities (static tokens) with their
RBAC, an HTTPS client that trusts exactly one certificate, the kube simulator's review
log, and the manager's HTTPS server run in the test's process (tests/manager_http).

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

from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm.kubeapi.reviews import Reviews, ReviewSettings
from pyccm.manager.access import AccessSettings, Gate
from pyccm.manager.http import Checks, HttpServer
from pyccm.manager.serving import ServingSettings
from pyccm_sim.kube.testing import KubeSimHandle

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
