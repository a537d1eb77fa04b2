"""A `pyccm manager` process serves its port over HTTPS, with delegated authentication and
authorization against the kube simulator, as upstream's CCM does.

One manager for the module, started as an operator would start it: the CCM
ServiceAccount's kubeconfig, `--cert-dir`, long review caches (so that a count of reviews
is exact). Every assertion is on what a scraper or the API server sees: status codes,
bodies, the certificate on the wire, the simulator's request log, the manager's own log.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pyccm import lifetime
from pyccm_sim.kube.testing import KubeSimHandle
from tests.support.https import (
    CCM_TOKEN,
    CCM_USER,
    GARBAGE_TOKEN,
    PAIR,
    READER_TOKEN,
    READER_USER,
    STRANGER_TOKEN,
    Reply,
    der_of,
    fetch,
    mark,
    peer_certificate,
    reviews,
    trusting,
)
from tests.support.ports import free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class RunningManager:
    port: int
    cert_dir: Path
    log: Path

    @property
    def cert(self) -> Path:
        return self.cert_dir / f"{PAIR}.crt"

    def get(self, path: str, token: str | None = None) -> Reply:
        return fetch(self.port, path, context=trusting(self.cert), token=token)


def start_manager(kubeconfig: Path, workdir: Path, *flags: str) -> subprocess.Popen[bytes]:
    with open(workdir / "manager.log", "wb") as out:
        return lifetime.spawn(
            [
                *(sys.executable, "-m", "pyccm", "manager", "--controllers="),
                f"--kubeconfig={kubeconfig}",
                "--leader-elect=false",
                f"--runtime-dir={workdir}/run",
                *flags,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    lifetime.stop(process, timeout=20)


@pytest.fixture(scope="module")
def manager(
    kube: KubeSimHandle, ccm_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningManager]:
    workdir = tmp_path_factory.mktemp("manager")
    running = RunningManager(free_port(), workdir / "certs", workdir / "manager.log")
    process = start_manager(
        ccm_kubeconfig,
        workdir,
        f"--secure-port={running.port}",
        f"--cert-dir={running.cert_dir}",
        "--authentication-token-webhook-cache-ttl=10m",
        "--authorization-webhook-cache-authorized-ttl=10m",
        "--authorization-webhook-cache-unauthorized-ttl=10m",
    )
    try:
        wait_for(
            lambda: process.poll() is not None or "serving securely" in running.log.read_text(),
            timeout=60,
            what="the manager serves its secure port",
        )
        assert process.poll() is None, running.log.read_text()
        yield running
    finally:
        stop(process)


def test_a_self_signed_pair_is_written_to_cert_dir_and_served(manager: RunningManager) -> None:
    key = manager.cert_dir / f"{PAIR}.key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert peer_certificate(manager.port) == der_of(manager.cert)
    # Trusting that file alone, a client verifies the server by address and by name.
    for host in ("127.0.0.1", "localhost"):
        reply = fetch(manager.port, "/healthz", context=trusting(manager.cert), host=host)
        assert reply.status == 200


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/healthz?verbose"])
def test_health_needs_no_token(manager: RunningManager, path: str) -> None:
    reply = manager.get(path)
    assert reply.status == 200, reply.body
    assert reply.body.endswith(b"ok\n")


def test_readyz_needs_no_token(manager: RunningManager) -> None:
    # Ready once the informers have synced: poll, then it stays ready.
    wait_for(lambda: manager.get("/readyz").status == 200, timeout=30, what="/readyz is 200")


def test_metrics_without_a_token_are_unauthorized(manager: RunningManager) -> None:
    reply = manager.get("/metrics")
    assert reply.status == 401
    assert reply.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def test_a_service_account_allowed_to_get_metrics_scrapes_them(manager: RunningManager) -> None:
    reply = manager.get("/metrics", token=READER_TOKEN)
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("text/plain; version=")
    assert b"# TYPE apiserver_delegated_authn_request_total counter" in reply.body
    assert b'apiserver_delegated_authn_request_total{code="201"}' in reply.body


def test_a_service_account_not_allowed_is_forbidden(manager: RunningManager) -> None:
    reply = manager.get("/metrics", token=STRANGER_TOKEN)
    assert (reply.status, reply.json()["reason"], reply.json()["message"]) == (
        403,
        "Forbidden",
        "Forbidden",
    )


def test_a_garbage_token_is_unauthorized(manager: RunningManager) -> None:
    reply = manager.get("/metrics", token=GARBAGE_TOKEN)
    assert (reply.status, reply.json()["reason"]) == (401, "Unauthorized")


def test_a_path_is_authorized_before_it_is_looked_up(
    manager: RunningManager, kube: KubeSimHandle
) -> None:
    # Who may not read a path does not learn whether it exists; the admin does.
    assert manager.get("/debug/pprof").status == 401
    assert manager.get("/debug/pprof", token=READER_TOKEN).status == 403
    assert manager.get("/debug/pprof", token=kube.token).status == 404


def test_no_answer_and_no_log_line_holds_a_token(manager: RunningManager) -> None:
    answers = [
        manager.get(path, token=token)
        for path in ("/metrics", "/healthz", "/nope")
        for token in (READER_TOKEN, STRANGER_TOKEN, GARBAGE_TOKEN, None)
    ]
    assert {a.status for a in answers} == {200, 401, 403}
    seen = b"".join(a.body + repr(a.headers).encode() for a in answers)
    seen += manager.log.read_bytes()
    for token in (READER_TOKEN, STRANGER_TOKEN, GARBAGE_TOKEN, CCM_TOKEN):
        assert token.encode() not in seen


def test_scrapes_within_the_ttl_cost_one_review_made_with_the_managers_identity(
    manager: RunningManager, kube: KubeSimHandle
) -> None:
    # A token and groups of its own, so no earlier test's cached answer counts.
    token = "prometheus-second-token-5d4c3b2a"
    kube.add_token(token, READER_USER, ("scrapers",))
    since = mark(kube)
    for _ in range(5):
        assert manager.get("/metrics", token=token).status == 200
    made = reviews(kube, since)
    assert sorted(r["resource"] for r in made) == ["subjectaccessreviews", "tokenreviews"]
    assert {(r["user"], r["code"]) for r in made} == {(CCM_USER, 201)}


def test_the_admin_in_system_masters_needs_no_access_review(
    manager: RunningManager, kube: KubeSimHandle
) -> None:
    kube.add_token("second-admin-token-7e6f", "second-admin", ("system:masters",))
    since = mark(kube)
    assert manager.get("/metrics", token="second-admin-token-7e6f").status == 200
    assert [r["resource"] for r in reviews(kube, since)] == ["tokenreviews"]


def test_given_cert_and_key_files_are_served_instead(
    kube: KubeSimHandle, ccm_kubeconfig: Path, tmp_path: Path
) -> None:
    from tests.support.certificates import issue_pair

    ca, cert, key = issue_pair(tmp_path, common_name="pyccm.example")
    port = free_port()
    process = start_manager(
        ccm_kubeconfig,
        tmp_path,
        f"--secure-port={port}",
        f"--tls-cert-file={cert}",
        f"--tls-private-key-file={key}",
        f"--cert-dir={tmp_path}/unused",
    )
    try:
        wait_for(
            lambda: (
                process.poll() is not None
                or "serving securely" in (tmp_path / "manager.log").read_text()
            ),
            timeout=60,
            what="the manager serves its secure port",
        )
        assert peer_certificate(port) == der_of(cert)
        reply = fetch(port, "/metrics", context=trusting(ca), token=READER_TOKEN, host="localhost")
        assert reply.status == 200
    finally:
        stop(process)
    assert not (tmp_path / "unused").exists()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--tls-cert-file=/etc/hostname",), "--tls-cert-file and --tls-private-key-file"),
        (("--tls-min-version=VersionTLS9",), "--tls-min-version: unknown version"),
        (("--tls-cipher-suites=TLS_RSA_WITH_RC4_128_SHA",), "--tls-cipher-suites: unsupported"),
        (("--tls-curve-preferences=P-256",), "--tls-curve-preferences: 'P-256' is not a number"),
        (("--tls-curve-preferences=0",), "curve preference 0 is out of range (must be 1-65535)"),
        (("--tls-curve-preferences=23,23",), "duplicate curve preference 23"),
        (("--tls-curve-preferences=9999",), "curve preference 9999 is not a Go crypto/tls"),
        (("--authorization-always-allow-paths=/a*b",), "only a trailing *"),
        (("--client-ca-file=/nonexistent/ca.crt",), "--client-ca-file: cannot read"),
        (("--kube-api-qps=0",), "--kube-api-qps must be above 0"),
        (("--kube-api-burst=0",), "--kube-api-burst at least 1"),
    ],
)
def test_a_bad_serving_flag_is_one_line_and_exit_2(
    tmp_path: Path, flags: tuple[str, ...], says: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pyccm", "manager", f"--kubeconfig={tmp_path}/none", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1, lines
    assert says in lines[0]
